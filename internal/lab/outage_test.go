package lab_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/loadgen"
)

// TestOutageDriver: the load runs before, across and after the outage,
// as one run, so the sample holds what the service answered while its
// dependency was down and once it was back; an outage that failed fails
// the run.
func TestOutageDriver(t *testing.T) {
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "dependency down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	load := lab.HTTP{URL: srv.URL, Load: []loadgen.Option{loadgen.Rate(200), loadgen.Connections(10)}}
	o := lab.Outage{HTTP: load, Before: 200 * time.Millisecond, After: 200 * time.Millisecond,
		Down: func(ctx context.Context) error {
			down.Store(true)
			defer down.Store(false)
			time.Sleep(300 * time.Millisecond)
			return nil
		}}
	start := time.Now()
	s, err := o.Drive(context.Background(), time.Millisecond, func(bool) {})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("the run took %v: want before + outage + after, about 0.7 s", took)
	}
	if s.StatusCodes["200"] == 0 || s.StatusCodes["503"] == 0 {
		t.Errorf("statuses %v: want 200s around the outage and 503s during it", s.StatusCodes)
	}
	if r := s.SuccessRatio(); r <= 0.2 || r >= 0.9 {
		t.Errorf("success ratio %.2f: want the outage's share (3/7) failed", r)
	}

	o.Down = func(context.Context) error { return errors.New("could not kill it") }
	if _, err := o.Drive(context.Background(), time.Millisecond, func(bool) {}); err == nil || !strings.Contains(err.Error(), "could not kill it") {
		t.Errorf("err = %v: a failed outage must fail the run", err)
	}
}

// TestRestartableKafkaOutage SIGKILLs the kfake the lab starts for fault
// rows while a producer writes to it, and starts it again: every record
// acknowledged before, during and after the outage is there once it is
// back, and so is a group's committed offset. kfake in memory would
// come back empty.
func TestRestartableKafkaOutage(t *testing.T) {
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	const topic, group = "outage", "outage-group"
	exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
		k, err := r.StartRestartableKafka(ctx, 1)
		if err != nil {
			return err
		}
		defer k.Stop()
		if err := k.CreateTopic(ctx, topic, 1); err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DefaultProduceTopic(topic),
			kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(time.Minute), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			return err
		}
		defer cl.Close()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0})
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).CommitOffsets(cctx, group, offs); err != nil {
			t.Errorf("commit: %v", err)
		}
		// Records every 10 ms through the outage, each waited for.
		var acked atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
					acked.Add(1)
				}
				cancel()
			}
		}()
		time.Sleep(300 * time.Millisecond)
		before := acked.Load()
		if err := k.Outage(ctx, time.Second); err != nil {
			close(stop)
			<-done
			return err
		}
		testkit.Eventually(t, 20*time.Second, "records acknowledged after the outage", func() bool { return acked.Load() > before+5 })
		close(stop)
		<-done
		if before == 0 {
			t.Errorf("nothing acknowledged before the outage")
		}
		lag, err := k.GroupLag(ctx, group)
		if err != nil {
			t.Errorf("the group's commit did not survive the kill: %v", err)
		} else if lag < acked.Load() {
			t.Errorf("after the kill the topic holds %d records past the group's commit: %d acknowledged records lost", lag, acked.Load()-lag)
		}
		return nil
	}}
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp},
		lab.Options{Mode: lab.Quick, Short: true, WorkDir: t.TempDir(), Self: bin}, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := results[0].Error; e != "" {
		t.Fatal(e)
	}
}
