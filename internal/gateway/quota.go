package gateway

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Quotas per caller: a line of the tokens file may bound what its token
// uses of one gateway (ParseTokens). Past its publish rate the gateway
// reads the token's publish streams more slowly (it never refuses for a
// rate); past its streams it refuses a new one with ResourceExhausted.
// The state is per token name, so it outlives a reload of the file that
// keeps the name, and the metrics carry the name, never the token.

// quota is what one token may use on one gateway; a zero field is no limit.
type quota struct {
	publishRate  int64 // messages a second
	publishBytes int64 // message bytes (keys, values, headers) a second
	maxStreams   int64 // publish and subscribe streams open at once
}

// The tokens file's keys that name a token and set its quota.
const (
	keyName         = "name"
	keyPublishRate  = "publish-rate"
	keyPublishBytes = "publish-bytes"
	keyMaxStreams   = "max-streams"
)

// Bounds of the quota keys' values: beyond them a value is a typo.
const (
	maxTokenNameLen = 64
	maxPublishRate  = 10_000_000 // messages a second
	maxPublishBytes = 1 << 40    // 1 TiB a second
	maxTokenStreams = 1_000_000
)

var tokenNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,64}$`)

// parseQuotaKey sets t's name or quota from key=val; false when key is
// not one of these.
func parseQuotaKey(t *token, key, val string) (bool, error) {
	var err error
	switch key {
	case keyName:
		if !tokenNameRE.MatchString(val) {
			return true, fmt.Errorf("name=%q: a name is 1 to %d letters, digits, '.', '_' or '-', e.g. name=billing", val, maxTokenNameLen)
		}
		t.name = val
	case keyPublishRate:
		t.quota.publishRate, err = parseCount(key, val, maxPublishRate, "messages a second, e.g. publish-rate=500")
	case keyMaxStreams:
		t.quota.maxStreams, err = parseCount(key, val, maxTokenStreams, "streams, e.g. max-streams=10")
	case keyPublishBytes:
		t.quota.publishBytes, err = parseBytesRate(val)
	default:
		return false, nil
	}
	return true, err
}

// parseCount parses a whole number from 1 to limit.
func parseCount(key, val string, limit int64, unit string) (int64, error) {
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil || n < 1 || n > limit {
		return 0, fmt.Errorf("%s=%s: write a whole number from 1 to %d, in %s (leave the key out for no limit)", key, val, limit, unit)
	}
	return n, nil
}

// byteUnits are the suffixes publish-bytes= takes: powers of 1024 only,
// so that "MB" (10^6 or 2^20?) is never guessed.
var byteUnits = []struct {
	suffix string
	size   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}}

// parseBytesRate parses publish-bytes=: a whole number of bytes a second,
// or a whole number of KiB, MiB or GiB.
func parseBytesRate(val string) (int64, error) {
	num, unit := val, int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(val, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > maxPublishBytes/unit {
		return 0, fmt.Errorf("%s=%s: write whole bytes a second, optionally in KiB, MiB or GiB (powers of 1024), from 1 to 1024GiB, e.g. %s=1048576 or %s=10MiB", keyPublishBytes, val, keyPublishBytes, keyPublishBytes)
	}
	return n * unit, nil
}

// quotaMetrics are the per-token-name series: names come from the tokens
// file only, so the label set is bounded by its lines.
type quotaMetrics struct {
	streamsG                                *prometheus.GaugeVec
	throttledC, refusedC, messagesC, bytesC *prometheus.CounterVec
}

func newQuotaMetrics(reg prometheus.Registerer) *quotaMetrics {
	m := &quotaMetrics{
		streamsG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "databus_token_streams",
			Help: "Streams (publish and subscribe) open on this gateway, by token name (the tokens file's name=)."}, []string{"token"}),
		throttledC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "databus_token_throttled_seconds_total",
			Help: "Time publish streams waited before reading their next batch because their token was past its publish-rate or publish-bytes, summed over streams, by token name."}, []string{"token"}),
		refusedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "databus_token_refused_total",
			Help: "Streams refused with ResourceExhausted by a token's quota, by token name and quota (max-streams)."}, []string{"token", "quota"}),
		messagesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "databus_token_published_messages_total",
			Help: "Messages received on publish streams (before Kafka stores them), by token name."}, []string{"token"}),
		bytesC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "databus_token_published_bytes_total",
			Help: "Message bytes (keys, values, headers) received on publish streams, by token name."}, []string{"token"}),
	}
	registerOrReuse(reg, &m.streamsG)
	registerOrReuse(reg, &m.throttledC)
	registerOrReuse(reg, &m.refusedC)
	registerOrReuse(reg, &m.messagesC)
	registerOrReuse(reg, &m.bytesC)
	return m
}

// forget deletes name's series.
func (m *quotaMetrics) forget(name string) {
	m.streamsG.DeleteLabelValues(name)
	m.throttledC.DeleteLabelValues(name)
	m.refusedC.DeleteLabelValues(name, keyMaxStreams)
	m.messagesC.DeleteLabelValues(name)
	m.bytesC.DeleteLabelValues(name)
}

// callers are the quota state of each token name on this gateway.
type callers struct {
	m      *quotaMetrics
	mu     sync.Mutex
	byName map[string]*caller
}

func newCallers(reg prometheus.Registerer) *callers {
	return &callers{m: newQuotaMetrics(reg), byName: map[string]*caller{}}
}

// apply gives every name in ts its quota now (a reload: a changed rate
// applies to the streams open at once), and drops the state of names no
// longer in the file that hold no stream.
func (cs *callers) apply(ts *Tokens) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	inFile := map[string]bool{}
	if ts != nil {
		for _, t := range ts.entries {
			inFile[t.name] = true
			cs.getLocked(t.name).setQuota(t.quota)
		}
	}
	for name, c := range cs.byName {
		if !inFile[name] && c.streams.Load() == 0 {
			delete(cs.byName, name)
			cs.m.forget(name)
		}
	}
}

func (cs *callers) getLocked(name string) *caller {
	c := cs.byName[name]
	if c == nil {
		c = &caller{
			name: name, changed: make(chan struct{}),
			streamsG:  cs.m.streamsG.WithLabelValues(name),
			throttled: cs.m.throttledC.WithLabelValues(name),
			refused:   cs.m.refusedC.WithLabelValues(name, keyMaxStreams),
			messages:  cs.m.messagesC.WithLabelValues(name),
			bytes:     cs.m.bytesC.WithLabelValues(name),
		}
		cs.byName[name] = c
	}
	return c
}

// open takes a place for a stream of t's, or returns the refusal. The
// place is given back by the caller's closeStream.
func (cs *callers) open(t *token) (*caller, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.getLocked(t.name) // its quota set by apply, at the load of t's file
	limit := c.maxStreams.Load()
	if n := c.streams.Add(1); limit > 0 && n > limit {
		c.streams.Add(-1)
		c.refused.Inc()
		return nil, streamError(codes.ResourceExhausted, "token %s holds its %s=%d streams on this gateway: close one, or raise %s in the tokens file", t.name, keyMaxStreams, limit, keyMaxStreams)
	}
	c.streamsG.Inc()
	return c, nil
}

// caller is one token name's quota state on this gateway: its streams and
// the buckets its publish streams share.
type caller struct {
	name       string
	streams    atomic.Int64
	maxStreams atomic.Int64
	rated      atomic.Bool // a publish rate is set: batches take from the buckets

	mu         sync.Mutex
	msgBucket  rateBucket
	byteBucket rateBucket
	// changed is closed, and replaced, when the rates change, so that
	// streams waiting on the old ones look again.
	changed chan struct{}

	streamsG                            prometheus.Gauge
	throttled, refused, messages, bytes prometheus.Counter
}

func (c *caller) setQuota(q quota) {
	c.maxStreams.Store(q.maxStreams)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgBucket.rate == float64(q.publishRate) && c.byteBucket.rate == float64(q.publishBytes) {
		return
	}
	now := time.Now()
	c.msgBucket.setRate(float64(q.publishRate), now)
	c.byteBucket.setRate(float64(q.publishBytes), now)
	c.rated.Store(q.publishRate > 0 || q.publishBytes > 0)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *caller) closeStream() {
	c.streams.Add(-1)
	c.streamsG.Dec()
}

// received counts a batch of n messages and size bytes read on one of
// the caller's publish streams against its rates.
func (c *caller) received(n int, size int64) {
	c.messages.Add(float64(n))
	c.bytes.Add(float64(size))
	if !c.rated.Load() {
		return
	}
	c.mu.Lock()
	now := time.Now()
	c.msgBucket.take(float64(n), now)
	c.byteBucket.take(float64(size), now)
	c.mu.Unlock()
}

// waitTurn waits, before a publish stream reads its next batch, until
// the caller's batches so far are paid for at its rates; false when
// the stream ends first, or the gateway drains.
func (c *caller) waitTurn(ctx context.Context, draining <-chan struct{}) bool {
	if !c.rated.Load() {
		return true
	}
	var waited time.Duration
	defer func() {
		if waited > 0 {
			c.throttled.Add(waited.Seconds())
		}
	}()
	for {
		c.mu.Lock()
		now := time.Now()
		d := max(c.msgBucket.owed(now), c.byteBucket.owed(now))
		changed := c.changed
		c.mu.Unlock()
		if d == 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		case <-draining:
		}
		t.Stop()
		waited += time.Since(now)
		if ctx.Err() != nil || isClosed(draining) {
			return false
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// callerKey is the context key of a publish stream's caller.
type callerKey struct{}

// callerOf is the quota state of the token a stream came with, nil when
// the gateway checks no tokens.
func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// callerStream is a stream whose context carries its caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s callerStream) Context() context.Context { return s.ctx }
