package timeoutsexp

import (
	"context"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// The front at rest, before any load: the report's first memory figure
// (18 samples of heapUsed 100 ms apart: min 3, max 4, avg 4 MB).
const (
	idleKey      labresult.Key = "front/idle"
	idleLabel                  = "front at rest, before any load (no timeout)"
	idleSampling               = 1800 * time.Millisecond // the report's 18 samples
)

var idleRef = &labresult.Ref{HeapMBAvg: labresult.F(4), HeapMBMax: labresult.F(4)}

// idle is a driver that sends nothing for the report's sampling time (or
// the run's, when shorter): the runner samples the front meanwhile.
type idle struct{}

func (idle) Drive(ctx context.Context, d time.Duration, window func(bool)) (*lab.Sample, error) {
	d = min(d, idleSampling)
	window(true)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		window(false)
		return nil, ctx.Err()
	case <-t.C:
	}
	window(false)
	return &lab.Sample{Model: "idle", Window: d, StatusCodes: map[string]int64{}, Errors: map[string]int64{}}, nil
}

// idleRow samples p's front at rest.
func (b *bench) idleRow(ctx context.Context, p *pair) (*labresult.Row, error) {
	row, err := b.run.Measure(ctx, lab.Measurement{
		Key: idleKey, Driver: idle{}, Procs: []*sandbox.Process{p.front.Proc},
		Duration: idleSampling, Repeat: 1, NoWarmup: true,
		Metrics: []string{p.front.URL("/metrics")},
	})
	if err != nil {
		return nil, err
	}
	// No request was sent: a rate, a success ratio or a latency of none
	// would read as a front that failed.
	row.RPS, row.RPSMin, row.RPSMax, row.SuccessRatio, row.P99MSMin, row.P99MSMax = nil, nil, nil, nil, nil, nil
	row.Note = "" // the runner's caveat on a run of few requests: none were meant
	row.AddNote("the front's Go heap %s/%s MB (avg/max), RSS %s MB, %s goroutines, sampled every 100 ms at rest; report: Node's heapUsed at rest, 18 samples: min 3, max 4, avg 4 MB",
		num(row.HeapMBAvg, 1), num(row.HeapMBMax, 1), num(row.RSSMBAvg, 1), num(row.GoroutinesAvg, 0))
	return row, nil
}
