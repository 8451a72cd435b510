package tasks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/highload-lab/hlab/internal/testkit"
)

// stuckExporter holds every export until released, like a collector that
// cannot keep up, and counts the spans it received.
type stuckExporter struct {
	release  chan struct{}
	exported atomic.Int64
}

func (e *stuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.exported.Add(int64(len(spans)))
	return nil
}

func (e *stuckExporter) Shutdown(context.Context) error { return nil }

// TestTelemetryCapBounded: with the cap (optimization 2), spans past the
// full queue are dropped and requests never wait; without it, every span
// is kept, so requests wait for the exporter, but the queue holds no more
// than its bound either way.
func TestTelemetryCapBounded(t *testing.T) {
	const spans = 3 * spanQueue
	for _, uncapped := range []bool{false, true} {
		exp := &stuckExporter{release: make(chan struct{})}
		cfg := &Config{TraceSample: 1, Deopt: Deopt{UncappedTelemetry: uncapped}}
		tp := sdktrace.NewTracerProvider(tracingOptions(cfg, exp)...)
		tracer := tp.Tracer("test")
		var ended atomic.Int64
		var wg sync.WaitGroup
		for range spans {
			wg.Go(func() {
				_, span := tracer.Start(context.Background(), "request")
				span.End()
				ended.Add(1)
			})
		}
		if !uncapped {
			wg.Wait() // never blocks: full means dropped
		} else {
			// Requests wait once the queue and the batch being exported
			// are full: the queue is bounded.
			testkit.Eventually(t, 10*time.Second, "spans to stop ending", func() bool {
				before := ended.Load()
				time.Sleep(100 * time.Millisecond)
				return ended.Load() == before && before > 0
			})
			if n := ended.Load(); n > spanQueue+spanBatch+1 {
				t.Fatalf("uncapped: %d spans ended with the exporter stuck, want at most the queue %d + a batch %d", n, spanQueue, spanBatch)
			}
		}
		close(exp.release)
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		got := exp.exported.Load()
		if uncapped && got != spans {
			t.Errorf("uncapped: %d of %d spans exported, want every one", got, spans)
		}
		if !uncapped && got >= spans {
			t.Errorf("capped: %d of %d spans exported with the exporter stuck, want the overflow dropped", got, spans)
		}
	}
}

// Without the cap every request is traced, whatever TraceSample says.
func TestTelemetryCapSampling(t *testing.T) {
	for _, tc := range []struct {
		uncapped bool
		want     bool
	}{{false, false}, {true, true}} {
		cfg := &Config{TraceSample: 0, Deopt: Deopt{UncappedTelemetry: tc.uncapped}}
		tp := sdktrace.NewTracerProvider(tracingOptions(cfg, nil)...)
		_, span := tp.Tracer("test").Start(context.Background(), "request")
		if got := span.SpanContext().IsSampled(); got != tc.want {
			t.Errorf("uncapped %v at sample 0: sampled %v, want %v", tc.uncapped, got, tc.want)
		}
		span.End()
	}
}
