package activities_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/internal/testkit"
)

// fakeStore records the batches it is asked to write; a write blocks
// until release is closed (when set), and fails rows whose data is "fail".
type fakeStore struct {
	mu      sync.Mutex
	batches [][]activities.Activity
	release chan struct{}
	started chan struct{} // gets a value as each write starts
}

func (f *fakeStore) write(ctx context.Context, rows []activities.Activity, errs []error) {
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.release != nil {
		<-f.release
	}
	f.mu.Lock()
	f.batches = append(f.batches, append([]activities.Activity(nil), rows...))
	f.mu.Unlock()
	for i, r := range rows {
		if string(r.Data) == `"fail"` {
			errs[i] = activities.ErrUnavailable
		}
	}
}

func (f *fakeStore) rows() (n int, largest int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		n += len(b)
		largest = max(largest, len(b))
	}
	return n, largest
}

func activity(data string) activities.Activity {
	a := activities.RandomActivity()
	a.Data = []byte(`"` + data + `"`)
	return a
}

// TestBatcherOneAtATime: a lone writer is never made to wait for company:
// each Add is its own batch.
func TestBatcherOneAtATime(t *testing.T) {
	f := &fakeStore{}
	b := activities.NewBatcher(activities.BatcherConfig{MaxDelay: time.Hour}, f.write)
	defer b.Close()
	for range 10 {
		if err := b.Add(context.Background(), activity("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n, largest := f.rows(); n != 10 || largest != 1 {
		t.Fatalf("%d rows, largest batch %d: want 10 batches of 1 (a free flusher takes a batch at once, not after MaxDelay)", n, largest)
	}
}

// TestBatcherGathersWhileBusy: rows that arrive while every flusher is
// busy go out together, bounded by MaxRows, and each Add returns only
// once its own row was written, with its own row's outcome.
func TestBatcherGathersWhileBusy(t *testing.T) {
	f := &fakeStore{release: make(chan struct{}), started: make(chan struct{}, 100)}
	b := activities.NewBatcher(activities.BatcherConfig{MaxRows: 8, Flushers: 1, MaxDelay: time.Hour}, f.write)
	defer b.Close()

	first := make(chan error, 1)
	go func() { first <- b.Add(context.Background(), activity("first")) }()
	<-f.started // the only flusher is now busy with "first"

	const n = 20
	var wg sync.WaitGroup
	var failed, ok atomic.Int64
	for i := range n {
		data := "x"
		if i%5 == 0 {
			data = "fail"
		}
		wg.Go(func() {
			err := b.Add(context.Background(), activity(data))
			switch {
			case err == nil && data == "x":
				ok.Add(1)
			case errors.Is(err, activities.ErrUnavailable) && data == "fail":
				failed.Add(1)
			default:
				t.Errorf("Add(%s) = %v", data, err)
			}
		})
	}
	select {
	case err := <-first:
		t.Fatalf("Add returned %v before its batch was written", err)
	default:
	}
	// Let every queued row reach the batcher before the flusher is freed
	// (MaxDelay is an hour, so nothing is sealed by time meanwhile).
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d rows queued", n+1), func() bool { return queued(b) >= n+1 })
	close(f.release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	total, largest := f.rows()
	if total != n+1 || largest < 2 || largest > 8 {
		t.Fatalf("%d rows written, largest batch %d: want %d, batches of 2-8 rows", total, largest, n+1)
	}
	if ok.Load() != 16 || failed.Load() != 4 {
		t.Fatalf("%d ok, %d failed: want each row's own outcome (16, 4)", ok.Load(), failed.Load())
	}
}

// queued is how many rows b holds, queued or being written.
func queued(b *activities.Batcher) int { return activities.Queued(b) }

// TestBatcherGivenUp: a row whose request gave up before its batch was
// sent is not written; Add returns at once with ErrUnavailable.
func TestBatcherGivenUp(t *testing.T) {
	f := &fakeStore{release: make(chan struct{}), started: make(chan struct{}, 10)}
	b := activities.NewBatcher(activities.BatcherConfig{Flushers: 1, MaxDelay: time.Hour}, f.write)
	defer b.Close()
	go b.Add(context.Background(), activity("first"))
	<-f.started
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Add(ctx, activity("abandoned")) }()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d rows queued", 2), func() bool { return queued(b) >= 2 })
	cancel()
	if err := <-errc; !errors.Is(err, activities.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Add = %v, want ErrUnavailable wrapping context.Canceled", err)
	}
	close(f.release)
	b.Close()
	for _, batch := range f.batches {
		for _, a := range batch {
			if string(a.Data) == `"abandoned"` {
				t.Fatal("the abandoned row was written")
			}
		}
	}
}

// TestBatcherOverload: beyond MaxQueued rows, Add fails at once.
func TestBatcherOverload(t *testing.T) {
	f := &fakeStore{release: make(chan struct{}), started: make(chan struct{}, 10)}
	b := activities.NewBatcher(activities.BatcherConfig{MaxRows: 2, MaxQueued: 3, Flushers: 1, MaxDelay: time.Hour}, f.write)
	for range 3 {
		go b.Add(context.Background(), activity("x"))
	}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d rows queued", 3), func() bool { return queued(b) >= 3 })
	if err := b.Add(context.Background(), activity("one too many")); !errors.Is(err, activities.ErrUnavailable) {
		t.Fatalf("Add over MaxQueued = %v, want ErrUnavailable", err)
	}
	close(f.release)
	b.Close()
	if n, _ := f.rows(); n != 3 {
		t.Fatalf("%d rows written, want the 3 queued (Close writes what is queued)", n)
	}
}
