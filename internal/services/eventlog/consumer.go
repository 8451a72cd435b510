package eventlog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/defaults"
)

// Defaults of ConsumerConfig's zero fields.
const (
	DefaultTopic          = "events"
	DefaultGroup          = "eventlog"
	DefaultDedupWindow    = 16384
	DefaultMaxPollRecords = 100
	DefaultCommitTimeout  = 10 * time.Second
	DefaultSessionTimeout = 10 * time.Second
	DefaultFetchMaxBytes  = 32 << 10
	DefaultDialTimeout    = 3 * time.Second
	DefaultLeaveTimeout   = 5 * time.Second
)

// ConsumerConfig configures a Consumer. Brokers is required; every zero
// field takes its Default* value.
type ConsumerConfig struct {
	// Brokers are Kafka's seed brokers, host:port.
	Brokers []string
	// Topic holds the events (default "events").
	Topic string
	// Group is the consumer group (default "eventlog"): members of one
	// group share the topic's partitions, and the group's committed
	// offsets are where a restarted member resumes.
	Group string
	// DedupWindow is how many recent event ids a Consumer remembers to
	// recognize a redelivery (default 16384, about 2 MB). A redelivered
	// event is counted as a duplicate and not processed again; one older
	// than the window, or redelivered to another process, is processed
	// again (at-least-once).
	DedupWindow int
	// MaxPollRecords bounds the events processed between two commits
	// (default 100): fewer means fewer redeliveries after a crash, more
	// means fewer commit requests.
	MaxPollRecords int
	// CommitTimeout bounds one offset commit (default 10 s). A commit
	// that fails is counted and retried by the next one; the events it
	// covered are redelivered if the member dies first.
	CommitTimeout time.Duration
	// SessionTimeout is how long a member that stopped heartbeating (a
	// crash) keeps its partitions before the group gives them to another
	// (default 10 s; Kafka refuses less than 6 s by default).
	SessionTimeout time.Duration
	// FetchMaxBytes bounds the bytes of one fetch response (default
	// 32 KiB): the consumer's memory for records in flight, as report D
	// learned about default 50 MB fetch buffers.
	FetchMaxBytes int32
	// DialTimeout bounds connecting to a broker (default 3 s).
	DialTimeout time.Duration
	// LeaveTimeout bounds leaving the group on Close (default 5 s): a
	// stopped broker cannot hold the shutdown.
	LeaveTimeout time.Duration
	// Registry receives the consumer's metrics (default: none kept).
	Registry prometheus.Registerer
	// Logger receives errors and group changes (default slog.Default()).
	Logger *slog.Logger
	// Processed, when set, is called with each event after its log work
	// and before its offset is committed, from the consuming goroutine.
	// Duplicates recognized by the window are not passed. For tests and
	// tools; it must be quick.
	Processed func(Event)
}

// setDefaults fills the zero fields with their defaults, or says what is
// missing.
func (c *ConsumerConfig) setDefaults() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("%w: give Kafka's seed brokers (--brokers host:port)", ErrNoBrokers)
	}
	c.Topic = cmp.Or(c.Topic, DefaultTopic)
	c.Group = cmp.Or(c.Group, DefaultGroup)
	defaults.Positive(&c.DedupWindow, DefaultDedupWindow)
	defaults.Positive(&c.MaxPollRecords, DefaultMaxPollRecords)
	defaults.Positive(&c.CommitTimeout, DefaultCommitTimeout)
	defaults.Positive(&c.SessionTimeout, DefaultSessionTimeout)
	defaults.Positive(&c.FetchMaxBytes, DefaultFetchMaxBytes)
	defaults.Positive(&c.DialTimeout, DefaultDialTimeout)
	defaults.Positive(&c.LeaveTimeout, DefaultLeaveTimeout)
	c.Registry = cmp.Or[prometheus.Registerer](c.Registry, prometheus.NewRegistry())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return nil
}

// Consumer processes the events of a topic as a member of a consumer
// group, at least once: it commits an offset only after the events before
// it were processed. Run consumes; Close leaves the group.
type Consumer struct {
	cfg  ConsumerConfig
	cl   *kgo.Client
	m    consumerMetrics
	seen *window

	ready atomic.Bool

	mu   sync.Mutex
	hwm  map[int32]int64 // high watermark per partition, from the last fetch
	next map[int32]int64 // next offset to process per partition
}

type consumerMetrics struct {
	consumed, duplicates, malformed, commits prometheus.Counter
	errors                                   *prometheus.CounterVec
	lag                                      prometheus.Gauge
	lastCommit                               prometheus.Gauge
}

// NewConsumer makes a consumer; it connects lazily, when Run starts.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, seen: newWindow(cfg.DedupWindow), hwm: map[int32]int64{}, next: map[int32]int64{}}
	c.m = consumerMetrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventlog_consumed_total", Help: "Events consumed from Kafka and processed (the log work done), redeliveries recognized as duplicates excluded.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventlog_consumer_duplicates_total", Help: "Redeliveries of an event this process had processed (within the dedup window), skipped.",
		}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventlog_consumer_malformed_total", Help: "Records that are not an event (no id, bad JSON): logged, skipped and committed.",
		}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventlog_consumer_commits_total", Help: "Offset commits that succeeded.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventlog_consumer_errors_total", Help: "Consumer errors by operation (fetch, commit) and kind.",
		}, []string{"op", "kind"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventlog_consumer_lag_records", Help: "Records in Kafka this member has not processed yet, summed over its partitions (high watermark of the last fetch minus the next offset to process).",
		}),
		lastCommit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventlog_consumer_last_commit_timestamp_seconds", Help: "When the last offset commit succeeded (Unix time).",
		}),
	}
	cfg.Registry.MustRegister(c.m.consumed, c.m.duplicates, c.m.malformed, c.m.commits, c.m.errors, c.m.lag, c.m.lastCommit)

	var err error
	c.cl, err = kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DialTimeout(cfg.DialTimeout),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		// A new group starts at the beginning: events produced before the
		// first member joined are events too.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Polls and rebalances exclude each other, so a commit after
		// processing always covers partitions this member still owns.
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(cfg.FetchMaxBytes),
		kgo.OnPartitionsRevoked(c.forget),
		kgo.OnPartitionsLost(c.forget),
	)
	if err != nil {
		return nil, fmt.Errorf("eventlog: kafka client: %w", err)
	}
	return c, nil
}

// Ready reports whether Kafka answered the consumer once.
func (c *Consumer) Ready() error {
	if !c.ready.Load() {
		return fmt.Errorf("eventlog: kafka at %v has not answered yet", c.cfg.Brokers)
	}
	return nil
}

// Run consumes and processes events until ctx ends, then commits what it
// processed and returns nil. Events polled but not processed are left
// for the next member (or this one, restarted): nothing is committed past
// an event that was not processed.
func (c *Consumer) Run(ctx context.Context) error {
	go c.awaitKafka(ctx)
	for {
		fetches := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			return ErrConsumerClosed
		}
		if ctx.Err() != nil {
			c.cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			kind := ErrorKind(err)
			c.m.errors.WithLabelValues("fetch", kind).Inc()
			c.cfg.Logger.Warn("eventlog: fetch error", "topic", topic, "partition", p, "kind", kind, "err", err)
		})
		var done []*kgo.Record
		stopped := false
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == nil {
				c.mu.Lock()
				c.hwm[p.Partition] = p.HighWatermark
				c.mu.Unlock()
			}
			for _, r := range p.Records {
				if stopped = stopped || ctx.Err() != nil; stopped {
					return
				}
				c.process(r)
				done = append(done, r)
			}
		})
		if len(done) > 0 {
			c.commit(done)
		}
		c.cl.AllowRebalance()
		c.updateLag()
		if stopped {
			return nil
		}
	}
}

// process does the log work for one record, unless it is a redelivery
// this process recognizes.
func (c *Consumer) process(r *kgo.Record) {
	ev, err := decodeRecord(r)
	c.mu.Lock()
	c.next[r.Partition] = r.Offset + 1
	c.mu.Unlock()
	if err != nil {
		c.m.malformed.Inc()
		c.cfg.Logger.Warn("eventlog: skipping a record that is not an event", "partition", r.Partition, "offset", r.Offset, "err", err)
		return
	}
	if c.seen.add(ev.ID) {
		c.m.duplicates.Inc()
		return
	}
	Log()
	c.m.consumed.Inc()
	if c.cfg.Processed != nil {
		c.cfg.Processed(ev)
	}
}

// commit commits past recs (all processed), under its own timeout: it
// also runs when Run's context has ended (a graceful stop).
func (c *Consumer) commit(recs []*kgo.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.cl.CommitRecords(ctx, recs...); err != nil {
		kind := ErrorKind(err)
		c.m.errors.WithLabelValues("commit", kind).Inc()
		c.cfg.Logger.Warn("eventlog: commit failed: the events it covered are redelivered if this member stops before the next commit", "kind", kind, "records", len(recs), "err", err)
		return
	}
	c.m.commits.Inc()
	c.m.lastCommit.SetToCurrentTime()
}

func (c *Consumer) updateLag() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lag int64
	for p, h := range c.hwm {
		if n, ok := c.next[p]; ok && h > n {
			lag += h - n
		}
	}
	c.m.lag.Set(float64(lag))
}

// forget drops lag bookkeeping of partitions this member no longer owns.
func (c *Consumer) forget(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range lost {
		for _, p := range ps {
			delete(c.hwm, p)
			delete(c.next, p)
		}
	}
}

// awaitKafka pings Kafka until it answers once, for readiness.
func (c *Consumer) awaitKafka(ctx context.Context) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.cl.Ping(pctx)
		cancel()
		if err == nil {
			c.ready.Store(true)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close leaves the group (within LeaveTimeout) and closes the client. Call
// it after Run returned.
func (c *Consumer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.LeaveTimeout)
	defer cancel()
	c.cl.AllowRebalance()
	if err := c.cl.LeaveGroupContext(ctx); err != nil && !errors.Is(err, context.Canceled) {
		c.cfg.Logger.Warn("eventlog: leaving the group failed: its partitions move after the session timeout", "err", err)
	}
	c.cl.Close()
}

// decodeRecord reads the event of a record: its value is the JSON Event;
// the key (or the RecordIDHeader) names the id when the value lacks one.
func decodeRecord(r *kgo.Record) (Event, error) {
	var ev Event
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		return ev, fmt.Errorf("eventlog: record value is not a JSON event: %w", err)
	}
	if ev.ID == "" {
		ev.ID = string(r.Key)
	}
	if ev.ID == "" {
		for _, h := range r.Headers {
			if h.Key == RecordIDHeader {
				ev.ID = string(h.Value)
			}
		}
	}
	if ev.ID == "" {
		return ev, errors.New("eventlog: event without an id")
	}
	return ev, nil
}

// window remembers the last n ids added.
type window struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newWindow(n int) *window {
	return &window{ids: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add remembers id and reports whether it was remembered already.
func (w *window) add(id string) (dup bool) {
	if _, ok := w.ids[id]; ok {
		return true
	}
	if old := w.ring[w.next]; old != "" {
		delete(w.ids, old)
	}
	w.ring[w.next] = id
	w.ids[id] = struct{}{}
	w.next = (w.next + 1) % len(w.ring)
	return false
}
