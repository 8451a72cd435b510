package gateway

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
)

// DefaultLagInterval is Config.LagInterval's default: how often the
// gateway asks Kafka for its groups' lag. Prometheus scrapes every 15-30 s
// as a rule; more often would only load the group coordinators.
const DefaultLagInterval = 15 * time.Second

// maxLagSeries bounds the lag series one gateway exports: a partition of
// a group and topic each. Past it the rest are left out (and
// databus_consumer_lag_truncated says so); the members' partitions are
// bounded by --max-kafka-clients times the topics' partitions, which a
// scrape of tens of thousands of series would not survive.
const maxLagSeries = 10000

// groupCollector exports, per group and topic this gateway serves (one
// member each, so at most --max-kafka-clients of them), the age of the
// oldest message delivered and not yet acked, read from the members at
// each scrape; and per partition that the gateway's members own, the
// consumer lag that lagLoop last read from Kafka. Series of groups and
// partitions the gateway no longer serves vanish with them.
type groupCollector struct {
	g         *Gateway
	oldest    *prometheus.Desc
	lag       *prometheus.Desc
	truncated *prometheus.Desc
	lags      atomic.Pointer[lagSnapshot]
}

// lagSnapshot is one reading of the members' partitions' lag.
type lagSnapshot struct {
	lags      []partitionLag
	truncated bool
}

type partitionLag struct {
	group, topic string
	partition    int32
	lag          int64
}

var _ prometheus.Collector = (*groupCollector)(nil)

func newGroupCollector(g *Gateway) *groupCollector {
	return &groupCollector{
		g: g,
		oldest: prometheus.NewDesc("databus_oldest_unacked_age_seconds",
			"Per group and topic served here: how long ago the oldest message delivered to a subscriber and not yet acked was sent (0: none). It holds its partition's commit point: a client that never acks a message shows as a line that only rises. A nacked message waiting for its redelivery counts too, from its first delivery.",
			[]string{"group", "topic"}, nil),
		lag: prometheus.NewDesc("databus_consumer_lag",
			"Per group, topic and partition that this gateway's group members own: the partition's high watermark less the group's committed offset (its log start offset before any commit), as Kafka answered at the last --lag-interval.",
			[]string{"group", "topic", "partition"}, nil),
		truncated: prometheus.NewDesc("databus_consumer_lag_truncated",
			"1 when databus_consumer_lag leaves partitions out to stay within its bound on series.", nil, nil),
	}
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.oldest
	ch <- c.lag
	ch <- c.truncated
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now().UnixNano()
	for _, m := range c.g.membersNow() {
		age := 0.0
		if at, ok := m.oldestUnacked(); ok {
			age = max(0, float64(now-at)/1e9)
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, m.key.group, m.key.topic)
	}
	snap := c.lags.Load()
	truncated := 0.0
	if snap != nil {
		for _, l := range snap.lags {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(l.lag), l.group, l.topic, strconv.Itoa(int(l.partition)))
		}
		if snap.truncated {
			truncated = 1
		}
	}
	ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.GaugeValue, truncated)
}

// membersNow returns the gateway's members at this moment.
func (g *Gateway) membersNow() []*member {
	g.membersMu.Lock()
	defer g.membersMu.Unlock()
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	return ms
}

// oldestUnacked returns when the oldest message m delivered and not yet
// acked was sent (Unix ns).
func (m *member) oldestUnacked() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldest, found := int64(0), false
	for _, p := range m.parts {
		if at, ok := p.t.oldestUnacked(); ok && (!found || at < oldest) {
			oldest, found = at, true
		}
	}
	return oldest, found
}

// ownedPartitions returns the partitions Kafka assigned m.
func (m *member) ownedPartitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int32, 0, len(m.parts))
	for id := range m.parts {
		ids = append(ids, id)
	}
	return ids
}

// lagLoop reads the lag of the groups this gateway serves every interval,
// each reading bounded by --kafka-timeout, until the gateway closes. It
// asks nothing of Kafka while no group is served. A failed reading keeps
// no stale figures: the series vanish until a reading succeeds, and the
// first failure of a run of them is logged.
func (c *groupCollector) lagLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		snap, err := c.readLags(ctx)
		if err != nil && ctx.Err() == nil {
			if !failing {
				c.g.log.Warn("databus: reading consumer lag from Kafka failed; databus_consumer_lag is empty until it succeeds", "err", err)
			}
			failing = true
		} else if err == nil {
			failing = false
		}
		c.lags.Store(snap)
	}
}

// readLags asks Kafka the lag of every partition the gateway's members
// own: committed offsets and watermarks of their groups, in one kadm.Lag.
func (c *groupCollector) readLags(ctx context.Context) (*lagSnapshot, error) {
	members := c.g.membersNow()
	if len(members) == 0 {
		return nil, nil
	}
	groups := map[string]bool{}
	var names []string
	for _, m := range members {
		if !groups[m.key.group] {
			groups[m.key.group] = true
			names = append(names, m.key.group)
		}
	}
	cl, err := c.g.sharedClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.g.cfg.KafkaTimeout)
	defer cancel()
	described, err := kadm.NewClient(cl).Lag(ctx, names...)
	if err != nil {
		return nil, err
	}
	snap := &lagSnapshot{}
	var errs []error
	for _, m := range members {
		gl, ok := described[m.key.group]
		if !ok {
			continue
		}
		if err := gl.Error(); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range m.ownedPartitions() {
			l, ok := gl.Lag.Lookup(m.key.topic, id)
			if !ok || l.Err != nil || l.Lag < 0 {
				continue
			}
			if len(snap.lags) == maxLagSeries {
				snap.truncated = true
				break
			}
			snap.lags = append(snap.lags, partitionLag{group: m.key.group, topic: m.key.topic, partition: id, lag: l.Lag})
		}
	}
	return snap, errors.Join(errs...)
}
