package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/loadgen"
)

// Outage drives HTTP load across a dependency's outage, as one run: the
// load runs for Before, for as long as Down takes (it takes the
// dependency down, brings it back and returns once it answers), then for
// After. The row then says what the service answered across the whole
// outage: its success ratio, latency and statuses. The runner's duration
// is not used: the outage sets the run's length, even in short runs.
type Outage struct {
	HTTP          HTTP // the load; its Cut is not used
	Before, After time.Duration
	Down          func(ctx context.Context) error
}

// outageLimit bounds a run beyond Before and After, Down included: Down
// bounds its own wait for the dependency's return, this bounds the load
// should it not.
const outageLimit = 3 * time.Minute

// Drive runs the load and the outage beside it. An error from Down fails
// the run: a fault row whose fault did not happen is no evidence.
func (o Outage) Drive(ctx context.Context, _ time.Duration, window func(bool)) (*Sample, error) {
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	downErr := make(chan error, 1)
	go func() {
		defer stop()
		select {
		case <-time.After(o.Before):
		case <-loadCtx.Done():
			downErr <- fmt.Errorf("lab: the load ended before the outage: %w", context.Cause(loadCtx))
			return
		}
		if err := o.Down(ctx); err != nil {
			downErr <- err
			return
		}
		select {
		case <-time.After(o.After):
		case <-ctx.Done():
		}
		downErr <- nil
	}()
	window(true)
	res, err := loadgen.Run(loadCtx, o.HTTP.URL, append(o.HTTP.Load, loadgen.Duration(o.Before+outageLimit+o.After))...)
	window(false)
	stop() // the load ended: so does the wait for After
	derr := <-downErr
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("lab: the outage: %w", derr)
	}
	return SampleOf(res), nil
}

var _ Driver = Outage{}
