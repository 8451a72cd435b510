package gateway_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// The gateway in front of a real three-broker cluster (replication 3,
// min.insync.replicas 2) whose brokers crash (SIGKILL): what a production
// cluster does to it. The shared cluster starts once for this package's
// tests (depstest.KafkaCluster); these tests are the project's only ones
// on a cluster, so a run of every package starts one. Each counts what
// the gateway acknowledged against what Kafka holds: an acknowledged
// message never found is lost, and none may be.

// clusterGateway serves a gateway on k. Group members that vanish with a
// stream are noticed after 6 s, the shortest session a broker allows by
// default.
func clusterGateway(t *testing.T, k *deps.Kafka, cfg gateway.Config) *gw {
	t.Helper()
	cfg.Brokers = k.Brokers
	cfg.SessionTimeout = cmp.Or(cfg.SessionTimeout, 6*time.Second)
	cfg.CommitInterval = cmp.Or(cfg.CommitInterval, 200*time.Millisecond)
	return startGateway(t, cfg)
}

// timed is a batch's or a delivery's latency, and when it began.
type timed struct {
	at time.Time
	d  time.Duration
}

// p99 returns the 99th percentile and the maximum of the latencies that
// overlap [from, to): those that began before to and ended after from,
// the batches a fault caught in flight included.
func p99(samples []timed, from, to time.Time) (p, worst time.Duration, n int) {
	var ds []time.Duration
	for _, s := range samples {
		if s.at.Before(to) && s.at.Add(s.d).After(from) {
			ds = append(ds, s.d)
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return ds[(len(ds)*99+99)/100-1], ds[len(ds)-1], len(ds)
}

// publishLoad publishes through a gateway on streams streams, each
// awaiting every batch's answer (10 messages, unique keys) before the
// next, until stop: what it acked, what failed, and each batch's latency.
type publishLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  map[string]bool
	failed int
	errs   map[string]int // failures by message
	lat    []timed
}

func startPublishing(t *testing.T, addr, topic string, streams int) *publishLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &publishLoad{cancel: cancel, acked: map[string]bool{}, errs: map[string]int{}}
	t.Cleanup(l.stop)
	c := dial(t, addr)
	for s := range streams {
		pub, err := c.NewPublisher(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer pub.Close()
			for seq := 0; ctx.Err() == nil; seq += 10 {
				start := time.Now()
				batch := make([]databus.Message, 10)
				for i := range batch {
					// The value is the send time: a subscriber's latency.
					batch[i] = databus.Message{Key: fmt.Appendf(nil, "s%d-%d", s, seq+i), Value: strconv.AppendInt(nil, start.UnixNano(), 10)}
				}
				// Long enough to ride out a failover: the client resends
				// what a broken stream left unanswered.
				bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
				err := pub.Publish(bctx, batch...)
				bcancel()
				l.record(batch, start, err, ctx.Err() != nil)
			}
		}()
	}
	return l
}

func (l *publishLoad) record(batch []databus.Message, start time.Time, err error, stopping bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		for _, m := range batch {
			l.acked[string(m.Key)] = true
		}
		l.lat = append(l.lat, timed{start, time.Since(start)})
		return
	}
	if stopping && errors.Is(err, context.Canceled) {
		return // the load's end, not a failure
	}
	l.failed += len(batch)
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	l.errs[msg]++
}

func (l *publishLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// awaitAcked waits until n batches have been acked: the streams are open
// and the producers warm before a fault strikes.
func (l *publishLoad) awaitAcked(t *testing.T, n int) {
	t.Helper()
	testkit.EventuallyNil(t, 30*time.Second, "publishers warm", func() error {
		if got := l.ackedSince(time.Time{}); got < n {
			return fmt.Errorf("%d of %d batches acked", got, n)
		}
		return nil
	})
}

// ackedKeys returns a copy of what was acked.
func (l *publishLoad) ackedKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.acked)
}

// ackedSince returns how many batches were acked that began after at.
func (l *publishLoad) ackedSince(at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lat {
		if s.at.After(at) {
			n++
		}
	}
	return n
}

// tally is what Kafka holds of a topic, counted by key.
type tally map[string]int

// readAll reads topic from its start to its end offsets as they are now,
// with a consumer of its own, and counts each key.
func readAll(t *testing.T, k *deps.Kafka, topic string) tally {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(depstest.Client(t, k))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := depstest.Client(t, k, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := tally{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: partitions %v not read to their end: %v", topic, want, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Key)]++
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return got
}

// delivery is the outcome of a fault test: acked against what Kafka holds
// (or what a group received).
type delivery struct {
	acked, failed, lost, duplicates int
}

func count(acked map[string]bool, held tally) delivery {
	var d delivery
	d.acked = len(acked)
	for key := range acked {
		if held[key] == 0 {
			d.lost++
		}
	}
	for _, n := range held {
		d.duplicates += max(0, n-1)
	}
	return d
}

// report logs a fault test's figures and fails it when an acked message
// was lost.
func (d delivery) report(t *testing.T, what string, samples []timed, fault, healed time.Time, errs map[string]int) {
	t.Helper()
	p, worst, n := p99(samples, fault, healed)
	before, _, _ := p99(samples, time.Time{}, fault)
	t.Logf("%s: %d acked, %d failed, %d lost, %d duplicates; p99 %v (max %v, %d samples) during the failover, %v before",
		what, d.acked, d.failed, d.lost, d.duplicates, p.Round(time.Millisecond), worst.Round(time.Millisecond), n, before.Round(time.Millisecond))
	for msg, n := range errs {
		t.Logf("  %d failed: %s", n, msg)
	}
	if d.acked == 0 {
		t.Fatal("nothing was acked: the test proves nothing")
	}
	if d.lost > 0 {
		t.Errorf("%d acknowledged messages are not in Kafka", d.lost)
	}
}

// awaitLeaderMoved waits until partition of topic is led by another
// broker than was.
func awaitLeaderMoved(t *testing.T, k *deps.Kafka, topic string, partition, was int32) int32 {
	t.Helper()
	var now int32
	testkit.EventuallyNil(t, 30*time.Second, "the partition's leadership moves off the killed broker", func() error {
		var err error
		if now, err = k.Leader(context.Background(), topic, partition); err != nil {
			return err
		}
		if now == was {
			return fmt.Errorf("still led by %d", was)
		}
		return nil
	})
	return now
}

// TestClusterLeaderKilledDuringPublish SIGKILLs the broker that leads a
// partition while four streams publish through the gateway: its
// partitions move to the in-sync followers, the publishers ride through
// (records retried by the gateway's producer, batches resent by the
// client), and nothing acknowledged is lost.
func TestClusterLeaderKilledDuringPublish(t *testing.T) {
	k := depstest.KafkaCluster(t)
	topic := depstest.Topic(t, k, 3)
	g := clusterGateway(t, k, gateway.Config{})
	l := startPublishing(t, g.addr, topic, 4)
	l.awaitAcked(t, 40)

	leader, err := k.Leader(context.Background(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	kill := time.Now()
	depstest.KillNode(t, k, leader)
	now := awaitLeaderMoved(t, k, topic, 0, leader)
	t.Logf("partition 0: broker %d killed, broker %d leads %s later", leader, now, time.Since(kill).Round(time.Millisecond))
	moved := time.Now()
	// Publishing on two brokers of three: a batch must be acked once the
	// new leader leads. The producer finds it through a metadata refresh
	// after its retries' backoff, a few seconds on a quiet machine; under
	// -race beside other packages' tests it has taken longer than the 2 s
	// this once waited, so the wait is generous and the assertion the same.
	ackedAfter := false
	for deadline := moved.Add(60 * time.Second); !ackedAfter && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		ackedAfter = l.ackedSince(moved) > 0
	}
	time.Sleep(time.Second) // and some more on the new leader
	l.stop()

	d := count(l.acked, readAll(t, k, topic))
	d.failed = l.failed
	d.report(t, "leader killed during publish", l.lat, kill, moved.Add(time.Second), l.errs)
	if !ackedAfter {
		t.Errorf("no batch acked in 60 s once broker %d led: two in-sync replicas of three should take writes", now)
	}
}

// TestClusterLeaderKilledDuringSubscribe SIGKILLs the broker that leads a
// partition while a group receives through the gateway what four streams
// publish: the member's fetches move to the new leader, its commits to
// the group's coordinator wherever it moved, and every acknowledged
// message arrives. The latency is end to end, from the send to the
// member's handler.
func TestClusterLeaderKilledDuringSubscribe(t *testing.T) {
	k := depstest.KafkaCluster(t)
	topic := depstest.Topic(t, k, 3)
	g := clusterGateway(t, k, gateway.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu   sync.Mutex
		held = tally{}
		e2e  []timed
	)
	subscribeErr := make(chan error, 1)
	c := g.client(t)
	go func() {
		subscribeErr <- c.Subscribe(ctx, topic, depstest.Group(t), func(_ context.Context, ds []databus.Delivery) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ds {
				held[string(d.Key)]++
				if ns, err := strconv.ParseInt(string(d.Value), 10, 64); err == nil {
					sent := time.Unix(0, ns)
					e2e = append(e2e, timed{sent, now.Sub(sent)})
				}
			}
			return nil
		})
	}()
	received := func(keys map[string]bool) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for key := range keys {
			if held[key] > 0 {
				n++
			}
		}
		return n
	}
	l := startPublishing(t, g.addr, topic, 4)
	l.awaitAcked(t, 40)
	// The member's first join to a cluster healed from the last test's
	// kill can take longer than a failover under -race beside other
	// packages' tests: what this test measures starts after it.
	testkit.EventuallyNil(t, 90*time.Second, "the member receives", func() error {
		select {
		case err := <-subscribeErr:
			t.Fatalf("Subscribe returned before the fault: %v", err)
		default:
		}
		if n := received(l.ackedKeys()); n < 100 {
			return fmt.Errorf("%d received", n)
		}
		return nil
	})

	leader, err := k.Leader(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	kill := time.Now()
	depstest.KillNode(t, k, leader)
	awaitLeaderMoved(t, k, topic, 0, leader)
	moved := time.Now()
	time.Sleep(2 * time.Second)
	l.stop()
	acked := l.ackedKeys()
	testkit.EventuallyNil(t, time.Minute, "every acked message received", func() error {
		if n := received(acked); n < len(acked) {
			return fmt.Errorf("%d of %d", n, len(acked))
		}
		return nil
	})
	cancel()
	mu.Lock()
	defer mu.Unlock()
	d := count(acked, held)
	d.failed = l.failed
	d.report(t, "leader killed during subscribe (end to end)", e2e, kill, moved.Add(time.Second), l.errs)
}

// TestClusterBrokerKillRestartThrice SIGKILLs the broker that leads a
// partition, starts it again and lets it catch up, three times in a row
// under publishing: leadership moves at each crash, the restarted broker
// rejoins the in-sync replicas, and nothing acknowledged is lost.
func TestClusterBrokerKillRestartThrice(t *testing.T) {
	k := depstest.KafkaCluster(t)
	topic := depstest.Topic(t, k, 3)
	g := clusterGateway(t, k, gateway.Config{})
	l := startPublishing(t, g.addr, topic, 4)
	time.Sleep(time.Second)

	ctx := context.Background()
	first := time.Now()
	var killed []int32
	for range 3 {
		leader, err := k.Leader(ctx, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		depstest.KillNode(t, k, leader)
		killed = append(killed, leader)
		awaitLeaderMoved(t, k, topic, 0, leader)
		depstest.StartNode(t, k, leader)
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		err = k.AwaitInSync(actx, topic)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	healed := time.Now()
	t.Logf("killed and restarted brokers %v in %s", killed, healed.Sub(first).Round(time.Millisecond))
	// Publishing goes on once the cluster has healed: a batch sent after
	// it is acked within seconds (a second was too short under -race
	// beside other packages' tests, where a failover's p99 reached 4 s).
	testkit.EventuallyNil(t, 30*time.Second, "a batch sent after the cluster healed acked", func() error {
		if l.ackedSince(healed) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	l.stop()

	d := count(l.acked, readAll(t, k, topic))
	d.failed = l.failed
	d.report(t, "a broker killed and restarted three times", l.lat, first, healed, l.errs)
}

// TestClusterTwoOfThreeDown SIGKILLs two brokers of three: the partitions
// keep one in-sync replica, fewer than min.insync.replicas=2, and Kafka
// refuses writes. The gateway acks nothing, and fails each message with a
// status that names the cause rather than a bare timeout; once the
// brokers are back, publishing works again.
func TestClusterTwoOfThreeDown(t *testing.T) {
	k := depstest.KafkaCluster(t)
	topic := depstest.Topic(t, k, 1)
	g := clusterGateway(t, k, gateway.Config{ProduceTimeout: 3 * time.Second})
	ctx := context.Background()
	pub, err := g.client(t).NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(ctx, msgs(0, 10)...); err != nil {
		t.Fatalf("publish on a healthy cluster: %v", err)
	}

	nodes := k.Nodes()
	down := nodes[:2]
	for _, id := range down {
		depstest.KillNode(t, k, id)
	}
	testkit.EventuallyNil(t, 30*time.Second, "the in-sync replicas shrink to the survivor", func() error {
		p, err := k.Partition(ctx, topic, 0)
		if err != nil {
			return err
		}
		if len(p.ISR) != 1 || p.Leader != nodes[2] {
			return fmt.Errorf("leader %d, in sync %v", p.Leader, p.ISR)
		}
		return nil
	})

	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = pub.Publish(pctx, msgs(10, 10)...)
	cancel()
	t.Logf("with brokers %v down, the publish ended after %s: %v", down, time.Since(start).Round(time.Millisecond), err)
	var pe *databus.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("publish with 1 in-sync replica of 3: %v, want a PublishError for each message", err)
	}
	if pe.Stored != 0 || len(pe.Records) != 10 {
		t.Errorf("%d stored, %d failed; want 0 stored (acked) and 10 failed", pe.Stored, len(pe.Records))
	}
	for _, r := range pe.Records {
		if r.Code != codes.Unavailable {
			t.Errorf("message %d: code %s, want Unavailable (retry once brokers are back)", r.Index, r.Code)
		}
		for _, want := range []string{"not enough in-sync replicas", "min.insync.replicas=2", "1 in sync"} {
			if !strings.Contains(r.Message, want) {
				t.Errorf("message %d: %q does not say %q", r.Index, r.Message, want)
			}
		}
	}

	if err := k.StartBroker(ctx); err != nil { // both at once
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	if err := k.AwaitInSync(actx, topic); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(actx, msgs(20, 10)...); err != nil {
		t.Fatalf("publish once the brokers are back: %v", err)
	}
	held := readAll(t, k, topic)
	for i := range 30 {
		key := fmt.Sprint(i)
		switch {
		case (i < 10 || i >= 20) && held[key] == 0:
			t.Errorf("acked message %s is not in Kafka", key)
		case i >= 10 && i < 20 && held[key] > 0:
			t.Logf("message %s, refused, is in Kafka all the same (at least once: a retry may store what was not acked)", key)
		}
	}
}
