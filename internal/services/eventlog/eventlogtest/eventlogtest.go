// Package eventlogtest gives the tests of the event log's consumer, and of
// the app whose events it consumes, a consumer run in the test's process
// and a Tracker of the events it processed.
//
//	tr := eventlogtest.NewTracker()
//	c := eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Processed: tr.Add})
//	testkit.Eventually(t, 30*time.Second, "every event processed", func() bool { return tr.Has(ids) })
package eventlogtest

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// Consumer is a consumer running in the background until Stop or the end
// of the test.
type Consumer struct {
	*eventlog.Consumer
	// Reg holds the consumer's metrics.
	Reg *prometheus.Registry

	once   sync.Once
	cancel context.CancelFunc
	done   chan error
	err    error
}

// Start runs a consumer of cfg, with a registry of its own (Reg), until
// Stop or the end of the test; t fails if the consumer cannot be made, or
// if its Run returns an error.
func Start(t testing.TB, cfg eventlog.ConsumerConfig) *Consumer {
	t.Helper()
	c := &Consumer{Reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	cfg.Registry = c.Reg
	var err error
	if c.Consumer, err = eventlog.NewConsumer(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
	return c
}

// Stop stops the consumer gracefully (it commits what it processed and
// leaves its group), closes it and returns what Run returned; later calls
// return the same.
func (c *Consumer) Stop() error {
	c.once.Do(func() {
		c.cancel()
		c.err = <-c.done
		c.Close()
	})
	return c.err
}

// Tracker counts the events a consumer processed, by id. Its Add is a
// ConsumerConfig.Processed; it is safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	seen map[string]int
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{seen: map[string]int{}} }

// Add counts ev as processed.
func (tr *Tracker) Add(ev eventlog.Event) { tr.AddID(ev.ID) }

// AddID counts the event with id as processed.
func (tr *Tracker) AddID(id string) {
	tr.mu.Lock()
	tr.seen[id]++
	tr.mu.Unlock()
}

// Seen returns how many times each id was processed.
func (tr *Tracker) Seen() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.seen)
}

// Total is how many events were processed, a redelivered one each time.
func (tr *Tracker) Total() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.seen {
		n += c
	}
	return n
}

// Has reports whether every id of want was processed.
func (tr *Tracker) Has(want []string) bool {
	n, _ := tr.Missing(want)
	return n == 0
}

// Missing returns how many ids of want were not processed, and the first
// five of them.
func (tr *Tracker) Missing(want []string) (n int, some []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, id := range want {
		if tr.seen[id] == 0 {
			n++
			if len(some) < 5 {
				some = append(some, id)
			}
		}
	}
	return n, some
}

// Duplicates counts the events processed, once each (unique), and the
// processings beyond the first (dups).
func (tr *Tracker) Duplicates() (unique, dups int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.seen {
		unique++
		dups += c - 1
	}
	return unique, dups
}

// Merged returns a tracker of what all of trs processed: the consumers of
// one group, a crashed member and its successor.
func Merged(trs ...*Tracker) *Tracker {
	all := NewTracker()
	for _, tr := range trs {
		for id, c := range tr.Seen() {
			all.seen[id] += c
		}
	}
	return all
}
