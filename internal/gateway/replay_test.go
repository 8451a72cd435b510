package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// produceAt writes keys from..from+n-1 to topic straight to Kafka,
// spread over its partitions, each stamped at ts, with a value of
// valueBytes (1 when not given).
func produceAt(t *testing.T, k *deps.Kafka, topic string, from, n int, ts time.Time, valueBytes ...int) {
	t.Helper()
	cl := depstest.Client(t, k, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	value := make([]byte, append(valueBytes, 1)[0])
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(from + i)), Value: value, Timestamp: ts}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// rawSubscribe opens a subscribe stream with exactly md.
func rawSubscribe(t *testing.T, ctx context.Context, addr string, md ...string) databusv1.DataBus_SubscribeClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s, err := databusv1.NewDataBusClient(conn).Subscribe(metadata.AppendToOutgoingContext(ctx, md...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drainReplay receives until the stream ends, and returns how many times
// each key came and the error that ended it (nil: OK).
func drainReplay(s databusv1.DataBus_SubscribeClient) (map[string]int, []*databusv1.ConsumedMessage, error) {
	got := map[string]int{}
	var all []*databusv1.ConsumedMessage
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return got, all, nil
		}
		if err != nil {
			return got, all, err
		}
		for _, m := range resp.Messages {
			got[string(m.Key)]++
			all = append(all, m)
		}
	}
}

// compareKeys reports the keys of want missing from got and those got
// has more than once or that want lacks.
func compareKeys(got map[string]int, want map[string]bool) (missing, extra int) {
	for key := range want {
		if got[key] == 0 {
			missing++
		}
	}
	for key, n := range got {
		if !want[key] {
			extra += n
		} else {
			extra += n - 1
		}
	}
	return missing, extra
}

func keyRange(from, n int) map[string]bool {
	out := map[string]bool{}
	for i := range n {
		out[strconv.Itoa(from+i)] = true
	}
	return out
}

// TestReplayFromTime: 200 messages before T, 200 from T on; a replay from
// T to the end delivers exactly the 200 after (none missing, none twice,
// none before T), ends with OK, and moves no group: a group's committed
// offsets stay, and it has no member.
func TestReplayFromTime(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 3)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		produceAt(t, k, topic, 0, 200, base)
		at := base.Add(time.Minute)
		produceAt(t, k, topic, 200, 200, at.Add(time.Second))

		adm := kadm.NewClient(depstest.Client(t, k))
		group := depstest.Group(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		before := kadm.Offsets{}
		before.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, group, before); err != nil {
			t.Fatal(err)
		}

		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg})
		s := rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartTime, at.Format(time.RFC3339Nano), databusv1.MDReplayEnd, "now", gateway.MDBatchSize, "30")
		got, all, err := drainReplay(s)
		if err != nil {
			t.Fatalf("the replay ended with %v, want OK", err)
		}
		missing, extra := compareKeys(got, keyRange(200, 200))
		t.Logf("replay from T: %d delivered, %d missing, %d extra", len(all), missing, extra)
		if missing != 0 || extra != 0 {
			t.Fatalf("%d missing, %d extra (duplicates or before T)", missing, extra)
		}
		for _, m := range all {
			if m.DeliveryCount != 0 || m.TimestampMs < at.UnixMilli() {
				t.Fatalf("message %s: delivery_count %d, timestamp %d (T %d): want 0 and at or after T", m.Key, m.DeliveryCount, m.TimestampMs, at.UnixMilli())
			}
		}

		if n := testkit.MetricSum(t, reg, "databus_replay_messages_total", nil); n != 200 {
			t.Errorf("databus_replay_messages_total %v, want 200", n)
		}
		testkit.Eventually(t, 10*time.Second, "the replay's stream and Kafka client released", func() bool {
			return testkit.MetricSum(t, reg, "databus_streams", map[string]string{"kind": "replay"}) == 0 &&
				testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "replay"}) == 0
		})

		after, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := after.Lookup(topic, 0); o.At != 7 || len(after[topic]) != 1 {
			t.Fatalf("the group's committed offsets moved: %v, want only partition 0 at 7", after)
		}
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if d := described[group]; len(d.Members) != 0 {
			t.Fatalf("group %s has %d members: a replay joined it", group, len(d.Members))
		}
	})
}

// TestReplayFromOffsets: only the partitions listed are read, each from
// its offset (one below the log start starts at the start, one past the
// end waits there); with replay-end now the stream ends OK after the
// last.
func TestReplayFromOffsets(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic := newTopic(t, k, 3)
	produceAt(t, k, topic, 0, 300, time.Now())
	// What Kafka holds, by partition and offset.
	cl := depstest.Client(t, k, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	stored := map[int32]map[int64]string{}
	testkit.EventuallyNil(t, 30*time.Second, "the 300 messages read back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if stored[r.Partition] == nil {
				stored[r.Partition] = map[int64]string{}
			}
			stored[r.Partition][r.Offset] = string(r.Key)
		})
		if n := len(stored[0]) + len(stored[1]) + len(stored[2]); n < 300 {
			return fmt.Errorf("%d of 300", n)
		}
		return nil
	})
	want := map[string]bool{}
	for o, key := range stored[0] {
		if o >= 40 {
			want[key] = true
		}
	}
	for _, key := range stored[1] { // 0 is the log start: all of it
		want[key] = true
	}
	w := startGateway(t, gateway.Config{Brokers: k.Brokers})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartOffsets, "0:40, 1:0", databusv1.MDReplayEnd, "now")
	got, all, err := drainReplay(s)
	if err != nil {
		t.Fatalf("the replay ended with %v, want OK", err)
	}
	missing, extra := compareKeys(got, want)
	t.Logf("replay from 0:40,1:0: %d delivered (want %d), %d missing, %d extra", len(all), len(want), missing, extra)
	if missing != 0 || extra != 0 {
		t.Fatalf("%d missing, %d extra", missing, extra)
	}

	// Past the end it waits: a message produced later arrives.
	end := int64(len(stored[2]))
	s = rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartOffsets, fmt.Sprintf("2:%d", end+1000))
	cl2 := depstest.Client(t, k)
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 2, Key: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil || len(resp.Messages) != 1 || string(resp.Messages[0].Key) != "late" || resp.Messages[0].Offset != end {
		t.Fatalf("got %v, %v: want the message produced after the replay opened, at offset %d", resp, err, end)
	}
}

// TestReplayEnds: an empty topic's replay to now ends at once with OK; a
// tailing replay ends with OK when its client closes its side.
func TestReplayEnds(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartTime, "0", databusv1.MDReplayEnd, "now")
	if got, _, err := drainReplay(s); err != nil || len(got) != 0 {
		t.Fatalf("empty topic: got %d messages, %v: want none and OK", len(got), err)
	}

	produceAt(t, k, topic, 0, 10, time.Now())
	// A replay to now runs to its end though its client closed its side
	// at once (as grpcurl -d does).
	s = rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartTime, "0", databusv1.MDReplayEnd, "now")
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := drainReplay(s); err != nil || len(got) != 10 {
		t.Fatalf("closed at once, to now: %d of 10 messages, %v: want all and OK", len(got), err)
	}

	s = rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartTime, "0")
	n := 0
	for n < 10 {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.Messages)
		// Acks are ignored, not refused.
		if err := s.Send(&databusv1.SubscribeRequest{Acks: []*databusv1.Ack{{Partition: resp.Messages[0].Partition, Offset: resp.Messages[0].Offset}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := drainReplay(s); err != nil || len(got) != 0 {
		t.Fatalf("after CloseSend: %d more messages, %v: want the stream to end OK", len(got), err)
	}
}

// TestReplayBadMetadata: each bad replay setting is InvalidArgument
// naming its key.
func TestReplayBadMetadata(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers})
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	tests := []struct {
		name string
		md   []string
		key  string
	}{
		{"group given", []string{databusv1.MDStartTime, "0", gateway.MDGroup, "g"}, gateway.MDGroup},
		{"time not a time", []string{databusv1.MDStartTime, "yesterday"}, databusv1.MDStartTime},
		{"time in the future", []string{databusv1.MDStartTime, future}, databusv1.MDStartTime},
		{"time before 1970", []string{databusv1.MDStartTime, "-5"}, databusv1.MDStartTime},
		{"time and offsets", []string{databusv1.MDStartTime, "0", databusv1.MDStartOffsets, "0:0"}, databusv1.MDStartOffsets},
		{"offsets malformed", []string{databusv1.MDStartOffsets, "0=5"}, databusv1.MDStartOffsets},
		{"offset negative", []string{databusv1.MDStartOffsets, "0:-1"}, databusv1.MDStartOffsets},
		{"partition negative", []string{databusv1.MDStartOffsets, "-1:0"}, databusv1.MDStartOffsets},
		{"partition twice", []string{databusv1.MDStartOffsets, "0:1,0:2"}, databusv1.MDStartOffsets},
		{"partition the topic lacks", []string{databusv1.MDStartOffsets, "0:0,7:0"}, databusv1.MDStartOffsets},
		{"end not now", []string{databusv1.MDStartTime, "0", databusv1.MDReplayEnd, "later"}, databusv1.MDReplayEnd},
		{"end without a start", []string{databusv1.MDReplayEnd, "now"}, databusv1.MDReplayEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := rawSubscribe(t, ctx, w.addr, append([]string{gateway.MDTopic, topic}, tt.md...)...)
			_, err := s.Recv()
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.key) {
				t.Fatalf("got %v: want InvalidArgument naming %s", err, tt.key)
			}
			t.Logf("%s", st.Message())
		})
	}
	t.Run("nack", func(t *testing.T) {
		produceAt(t, k, topic, 0, 1, time.Now())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := rawSubscribe(t, ctx, w.addr, gateway.MDTopic, topic, databusv1.MDStartTime, "0")
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Messages[0]
		s.Send(&databusv1.SubscribeRequest{Nacks: []*databusv1.Nack{{Partition: m.Partition, Offset: m.Offset}}})
		_, _, err = drainReplay(s)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "nothing to nack") {
			t.Fatalf("got %v: want InvalidArgument, nothing to nack", err)
		}
	})
}

// TestReplayTokens: with --tokens a replay needs subscribe= covering its
// topic, and no groups= (it has no group).
func TestReplayTokens(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	produceAt(t, k, topic, 0, 5, time.Now())
	ts, err := gateway.ParseTokens(strings.NewReader("reader subscribe=" + topic + " groups=only-this-group\nother subscribe=elsewhere groups=*\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Brokers: k.Brokers}, gateway.ServerOptions{Auth: &gateway.Auth{Tokens: ts}})
	replay := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := rawSubscribe(t, ctx, addr, "authorization", "Bearer "+token, gateway.MDTopic, topic, databusv1.MDStartTime, "0", databusv1.MDReplayEnd, "now")
		got, _, err := drainReplay(s)
		if err == nil && len(got) != 5 {
			return fmt.Errorf("%d of 5 messages", len(got))
		}
		return err
	}
	if err := replay("reader"); err != nil {
		t.Fatalf("a token with subscribe= of the topic: %v, want the replay", err)
	}
	if err := replay("other"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a token without the topic: %v, want PermissionDenied", err)
	}
}

// TestReplayAcrossGatewayKill: Client.Replay through a gateway process
// SIGKILLed and restarted mid-replay hands each message after T to its
// handler exactly once, and none before T.
func TestReplayAcrossGatewayKill(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	k := depstest.Kafka(t, deps.KafkaReal)
	topic := newTopic(t, k, 3)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	produceAt(t, k, topic, 0, 1000, base)
	at := base.Add(time.Minute)
	produceAt(t, k, topic, 1000, 3000, at)
	g := startGatewayProcess(t, bin, "--brokers", strings.Join(k.Brokers, ","))
	c := dial(t, g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	handled := map[string]int{}
	total := 0
	killAt, killed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ended := make(chan error, 1)
	go func() {
		ended <- c.Replay(ctx, topic, databus.FromTime(at).UntilNow(), func(_ context.Context, ds []databus.Delivery) error {
			mu.Lock()
			for _, d := range ds {
				handled[string(d.Key)]++
			}
			total += len(ds)
			n := total
			mu.Unlock()
			if n >= 500 {
				// Hold the replay until the gateway was killed, so that
				// the kill lands mid-way.
				once.Do(func() { close(killAt) })
				<-killed
			}
			return nil
		}, databus.BatchSize(50))
	}()
	select {
	case <-killAt:
	case err := <-ended:
		t.Fatalf("the replay ended before the kill: %v", err)
	}
	pid := g.cmd.Process.Pid
	g.kill()
	close(killed)
	g.start()
	t.Logf("SIGKILLed gateway pid %d mid-replay, started pid %d", pid, g.cmd.Process.Pid)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the replay did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	missing, extra := compareKeys(handled, keyRange(1000, 3000))
	t.Logf("across a SIGKILL: %d handled, %d missing, %d extra", total, missing, extra)
	if missing != 0 || extra != 0 {
		t.Fatalf("%d missing, %d extra (handled twice or before T)", missing, extra)
	}
}

// TestReplayDrain: a draining gateway ends a tailing replay with
// Unavailable, and its drain waits for the replay's reader to stop.
func TestReplayDrain(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	produceAt(t, k, topic, 0, 3, time.Now())
	reg := prometheus.NewRegistry()
	g, err := gateway.New(gateway.Config{Brokers: k.Brokers, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	addr := gatewaytest.Serve(t, g, gateway.NewServer(sctx, g, gateway.ServerOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := rawSubscribe(t, ctx, addr, gateway.MDTopic, topic, databusv1.MDStartOffsets, "0:0")
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- g.Drain(ctx) }()
	_, _, err = drainReplay(s)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v: want Unavailable (the gateway drains)", err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if n := testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "replay"}); n != 0 {
		t.Fatalf("%v replay Kafka clients open after the drain, want 0", n)
	}
}

// TestReplayMovedAndFull: a replay whose connection grows old ends with
// STREAM_MOVED, and Client.Replay from offsets reopens it past what its
// handler had (each message once); a gateway with no Kafka client place
// left refuses a replay with ResourceExhausted.
func TestReplayMovedAndFull(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	// 2 MB, far beyond what HTTP/2's windows hold: the gateway sends
	// while the handler works, so the connection ages mid-replay.
	produceAt(t, k, topic, 0, 2000, time.Now(), 1000)
	addr := gatewaytest.Start(t, gateway.Config{Brokers: k.Brokers}, gateway.ServerOptions{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	handled := map[string]int{}
	total := 0
	var moved int
	c := dial(t, addr, databus.WithDialOptions(grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return movedCounter{ClientStream: s, moved: &moved}, err
	})))
	err := c.Replay(ctx, topic, databus.FromOffsets(map[int32]int64{0: 0, 1: 0}).UntilNow(), func(_ context.Context, ds []databus.Delivery) error {
		for _, d := range ds {
			handled[string(d.Key)]++
		}
		total += len(ds)
		time.Sleep(10 * time.Millisecond) // about 2 s in all: the connection ages several times
		return nil
	}, databus.BatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	missing, extra := compareKeys(handled, keyRange(0, 2000))
	t.Logf("%d handled across %d moved streams: %d missing, %d extra", total, moved, missing, extra)
	if missing != 0 || extra != 0 || moved == 0 {
		t.Fatalf("%d missing, %d extra, %d streams moved: want 0, 0 and some", missing, extra, moved)
	}

	full := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxKafkaClients: 1}) // the shared producer's place only
	s := rawSubscribe(t, ctx, full.addr, gateway.MDTopic, topic, databusv1.MDStartTime, "0")
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-kafka-clients") {
		t.Fatalf("got %v: want ResourceExhausted naming --max-kafka-clients", err)
	}
}

// movedCounter counts the streams that ended with STREAM_MOVED.
type movedCounter struct {
	grpc.ClientStream
	moved *int
}

func (m movedCounter) RecvMsg(v any) error {
	err := m.ClientStream.RecvMsg(v)
	if databus.Moved(err) {
		*m.moved++
	}
	return err
}
