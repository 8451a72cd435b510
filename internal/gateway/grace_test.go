package gateway_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// serveGateway serves a gateway of cfg until the test ends, as
// startGateway does, and returns the gateway too.
func serveGateway(t *testing.T, cfg gateway.Config) (*gateway.Gateway, *gw) {
	t.Helper()
	g, addr := gatewaytest.StartGateway(t, cfg, gateway.ServerOptions{})
	return g, &gw{addr: addr}
}

// lostAndDuplicates returns how many of msgs(0, total) were never acked,
// and how many acks repeated one.
func (s *keys) lostAndDuplicates(total int) (lost, dups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range total {
		switch n := s.m[fmt.Sprint(i)]; {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// A consumer that fails on a message and reopens its subscription (the
// Go client's Subscribe did so on every handler error), ten times within
// a few graces, rebalances its group at most once per grace: its member
// stays in the group between streams. With --member-grace 0 each reopen
// is a leave and a join: two rebalances.
func TestReconnectInGraceIsNoRebalance(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic, group := newTopic(t, k, 1), depstest.Group(t)
	const grace = 3 * time.Second
	g, w := serveGateway(t, gateway.Config{Brokers: k.Brokers, MemberGrace: grace})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The poison message is the first, so the failing consumer acks
	// nothing: every ack below is the final consumer's.
	const total = 20
	w.publishAll(t, ctx, topic, total)
	c := w.client(t)

	var start time.Time
	first, poisoned := int32(-1), 0
	for range 10 {
		sub, err := c.OpenSubscription(ctx, topic, group)
		if err != nil {
			t.Fatal(err)
		}
		for seen := false; !seen; {
			b, err := sub.Recv()
			if err != nil {
				t.Fatalf("after %d poison deliveries: %v", poisoned, err)
			}
			for _, d := range b.Messages {
				if string(d.Key) == "0" {
					seen = true
					poisoned++
				}
			}
		}
		if first < 0 {
			first, start = gateway.MemberGeneration(g, group, topic), time.Now()
		}
		sub.Close()                        // fails: nothing acked
		time.Sleep(100 * time.Millisecond) // the client's backoff
	}
	elapsed := time.Since(start)

	var acks keys
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	go c.Subscribe(sctx, topic, group, func(_ context.Context, ds []databus.Delivery) error {
		acks.add(ds...)
		return nil
	})
	testkit.EventuallyNil(t, 30*time.Second, "every message acked", func() error {
		if lost, _ := acks.lostAndDuplicates(total); lost > 0 {
			return fmt.Errorf("%d of %d not acked", lost, total)
		}
		return nil
	})
	last := gateway.MemberGeneration(g, group, topic)
	scancel()
	lost, dups := acks.lostAndDuplicates(total)
	rebalances := int(last - first)
	bound := 1 + int(elapsed/grace)
	t.Logf("10 reopens in %v: generation %d -> %d (%d rebalances, at most %d allowed); poison delivered %d times; %d lost, %d duplicates",
		elapsed.Round(time.Millisecond), first, last, rebalances, bound, poisoned, lost, dups)
	if first < 0 || last < first || rebalances > bound {
		t.Errorf("generation %d -> %d in %v: more than one rebalance per %v grace", first, last, elapsed, grace)
	}
	if poisoned != 10 || lost != 0 || dups != 0 {
		t.Errorf("poison delivered %d times (want 10), %d lost, %d duplicates", poisoned, lost, dups)
	}
}

// owned tracks the partitions a subscription has, from its batches'
// notices, and acks everything it receives.
type owned struct {
	mu    sync.Mutex
	parts map[int32]bool
}

func (o *owned) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.parts)
}

func consume(sub *databus.Subscription, acks *keys) *owned {
	o := &owned{parts: map[int32]bool{}}
	go func() {
		for {
			b, err := sub.Recv()
			if err != nil {
				return
			}
			o.mu.Lock()
			for _, p := range b.Assigned {
				o.parts[p] = true
			}
			for _, p := range b.Revoked {
				delete(o.parts, p)
			}
			o.mu.Unlock()
			acks.add(b.Messages...)
			if sub.Ack(b.Messages...) != nil {
				return
			}
		}
	}()
	return o
}

// A member whose last stream ended and none came back leaves its group
// when the grace ends: another gateway's member then takes its
// partitions, and once that one's stream is gone too the group is empty.
func TestMemberLeavesAfterGrace(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic, group := newTopic(t, k, 2), depstest.Group(t)
	cfg := gateway.Config{Brokers: k.Brokers, MemberGrace: time.Second}
	_, a := serveGateway(t, cfg)
	_, b := serveGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(depstest.Client(t, k))

	var acks keys
	subA, err := a.client(t).OpenSubscription(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	ownA := consume(subA, &acks)
	subB, err := b.client(t).OpenSubscription(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	ownB := consume(subB, &acks)
	testkit.Eventually(t, 30*time.Second, "a partition each", func() bool { return ownA.count() == 1 && ownB.count() == 1 })
	const half = 20
	a.publishAll(t, ctx, topic, half)
	// Everything acked and committed before A's stream ends, so that a
	// redelivery below would be the gateway's doing.
	testkit.EventuallyNil(t, 30*time.Second, "the first half acked and committed", func() error {
		if lost, _ := acks.lostAndDuplicates(half); lost > 0 {
			return fmt.Errorf("%d not acked", lost)
		}
		return committedToEnd(ctx, adm, group, topic)
	})

	subA.Close()
	testkit.Eventually(t, 30*time.Second, "B's stream given A's partition once A's grace ended", func() bool { return ownB.count() == 2 })
	pub, err := b.client(t).NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, msgs(half, half)...); err != nil {
		t.Fatal(err)
	}
	pub.Close()
	testkit.EventuallyNil(t, 30*time.Second, "the second half acked", func() error {
		if lost, _ := acks.lostAndDuplicates(2 * half); lost > 0 {
			return fmt.Errorf("%d of %d not acked", lost, 2*half)
		}
		return nil
	})
	lost, dups := acks.lostAndDuplicates(2 * half)
	t.Logf("%d messages: %d lost, %d duplicates", 2*half, lost, dups)
	if dups != 0 {
		t.Errorf("%d duplicates: A's member left without committing, or B's started before A's commit point", dups)
	}

	subB.Close()
	testkit.EventuallyNil(t, 30*time.Second, "the group empty once B's grace ended", func() error {
		return groupEmpty(ctx, adm, group)
	})
}

// A gateway that closes does not wait for its members' graces: they
// leave their groups at once.
func TestCloseEndsGrace(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic, group := newTopic(t, k, 1), depstest.Group(t)
	// A grace longer than the polls below wait.
	g, err := gateway.New(gateway.Config{Brokers: k.Brokers, SessionTimeout: 2 * time.Minute, MemberGrace: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := gateway.NewServer(ctx, g, gateway.ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	w := &gw{addr: ln.Addr().String()}
	adm := kadm.NewClient(depstest.Client(t, k))
	sub, err := w.client(t).OpenSubscription(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	var acks keys
	own := consume(sub, &acks)
	testkit.Eventually(t, 30*time.Second, "the partition assigned", func() bool { return own.count() == 1 })
	sub.Close()
	testkit.EventuallyNil(t, 30*time.Second, "the member in its grace, in the group", func() error {
		if err := groupEmpty(ctx, adm, group); err == nil {
			return fmt.Errorf("the group is empty during the grace")
		}
		return nil
	})
	srv.Stop()
	g.Close()
	testkit.EventuallyNil(t, 30*time.Second, "the group empty once the gateway closed", func() error {
		return groupEmpty(ctx, adm, group)
	})
}

// committedToEnd says whether group's committed offsets of topic reached
// each partition's end.
func committedToEnd(ctx context.Context, adm *kadm.Client, group, topic string) error {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	var behind error
	ends.Each(func(e kadm.ListedOffset) {
		if c, ok := offs.Lookup(topic, e.Partition); !ok || c.At < e.Offset {
			behind = fmt.Errorf("partition %d committed %d of %d", e.Partition, c.At, e.Offset)
		}
	})
	return behind
}

// groupEmpty says whether group has no member.
func groupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d := ds[group]
	if d.Err != nil {
		return d.Err
	}
	if len(d.Members) > 0 {
		return fmt.Errorf("group %s: %d members, state %s", group, len(d.Members), d.State)
	}
	return nil
}
