package checker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

var testSandbox *sandbox.Sandbox

func TestMain(m *testing.M) {
	sb, err := sandbox.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testSandbox = sb
	code := m.Run()
	for _, k := range kafkas {
		k.Stop()
	}
	sb.Close()
	os.Exit(code)
}

var (
	kafkaMu sync.Mutex
	kafkas  = map[deps.KafkaKind]*deps.Kafka{}
)

// kafkaFor starts (once per kind) the Kafka the tests share.
func kafkaFor(t *testing.T, kind deps.KafkaKind) *deps.Kafka {
	t.Helper()
	kafkaMu.Lock()
	defer kafkaMu.Unlock()
	if k := kafkas[kind]; k != nil {
		return k
	}
	k, err := deps.StartKafka(context.Background(), testSandbox, deps.KafkaConfig{Kind: kind})
	if err != nil {
		t.Fatalf("start %s: %v", kind, err)
	}
	kafkas[kind] = k
	return k
}

// forEachKafka runs test against kfake and, unless HLAB_KAFKA=kfake, the
// real broker too (as the gateway's integration tests do).
func forEachKafka(t *testing.T, test func(t *testing.T, k *deps.Kafka)) {
	kinds := deps.KafkaKinds
	if os.Getenv("HLAB_KAFKA") == "kfake" {
		kinds = []deps.KafkaKind{deps.KafkaFake}
	}
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) { test(t, kafkaFor(t, kind)) })
	}
}

var topicSeq atomic.Int64

func newTopic(t *testing.T, k *deps.Kafka) string {
	t.Helper()
	name := fmt.Sprintf("checker-test-%d-%d", time.Now().UnixNano(), topicSeq.Add(1))
	if err := k.CreateTopics(context.Background(), 4, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// summary is res's text summary, written to the test's log too.
func summary(t *testing.T, res *checker.Result) string {
	t.Helper()
	var out bytes.Buffer
	res.WriteText(&out)
	t.Log("\n" + out.String())
	return out.String()
}

// startGateway serves a gateway on 127.0.0.1:0 with extra server options
// (interceptors) and returns its address.
func startGateway(t *testing.T, cfg gateway.Config, opts ...grpc.ServerOption) string {
	t.Helper()
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	databusv1.RegisterDataBusServer(srv, g)
	return gatewaytest.Serve(t, g, srv)
}

func TestScenariosVerifyDelivery(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
		tests := []struct {
			name string
			cfg  checker.Config
		}{
			{"latency, concurrent consumers", checker.Config{Scenario: checker.Latency, Streams: 3, Groups: 2, Members: 2}},
			{"throughput, consumers after", checker.Config{Scenario: checker.Throughput, Streams: 2, Batch: 50, Inflight: 4, Groups: 1, Members: 3, Consume: checker.After}},
			{"throughput, aggregation, shared connection", checker.Config{Scenario: checker.Throughput, Streams: 4, Connections: 1, Batch: 20, Aggregation: true, Groups: 1, Members: 1}},
			{"ticker, slow consumers", checker.Config{Scenario: checker.Ticker, Streams: 50, Interval: 100 * time.Millisecond, Groups: 2, Members: 2, SubBatch: 10, ProcessDelay: 5 * time.Millisecond}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := tt.cfg
				cfg.Target, cfg.Topic = addr, newTopic(t, k)
				cfg.Warmup, cfg.Duration, cfg.DrainTimeout = 200*time.Millisecond, 700*time.Millisecond, 30*time.Second
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				res, err := checker.Run(ctx, cfg, t.Logf)
				if err != nil {
					t.Fatal(err)
				}
				summary(t, res)
				d := res.Delivery
				switch {
				case d == nil:
					t.Fatal("no delivery verification")
				case res.Acked == 0 || res.MsgsPerSec == 0 || res.PublishLatency.Count == 0:
					t.Fatalf("nothing measured: %d acked, %.0f msgs/s, %d latencies", res.Acked, res.MsgsPerSec, res.PublishLatency.Count)
				case d.Lost != 0 || !res.OK():
					t.Fatalf("%d lost (first: %v)", d.Lost, d.Sample)
				case d.Acked != res.Acked:
					t.Fatalf("the ledger has %d acked messages, the publishers counted %d", d.Acked, res.Acked)
				case d.Received < int64(cfg.Groups)*d.Acked:
					t.Fatalf("%d received by %d groups, fewer than %d acked each", d.Received, cfg.Groups, d.Acked)
				case d.Cycles == 0:
					t.Fatal("no get-ack cycles counted")
				}
				if cfg.Consume != checker.After && (res.E2ELatency == nil || res.E2ELatency.Count == 0) {
					t.Fatal("concurrent consumers measured no end-to-end latency")
				}
				if len(res.Errors) > 0 {
					t.Fatalf("errors: %v", res.Errors)
				}
			})
		}
	})
}

// dropper is a stream interceptor that silently removes the first message
// of the nth publish request: the gateway stores the rest and answers the
// batch as fine, so the publisher counts the dropped message as acked.
type dropper struct {
	nth     int64
	seen    atomic.Int64
	dropped atomic.Int64
}

func (d *dropper) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &dropStream{ServerStream: ss, d: d})
}

type dropStream struct {
	grpc.ServerStream
	d *dropper
}

func (s *dropStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*databusv1.PublishRequest); ok && err == nil && len(req.Messages) > 0 {
		if s.d.seen.Add(1) == s.d.nth {
			req.Messages = req.Messages[1:]
			s.d.dropped.Add(1)
		}
	}
	return err
}

// TestDroppedMessageIsReportedLost: the verification can fail. A message
// the gateway acked but never wrote must come out as lost, by name.
func TestDroppedMessageIsReportedLost(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	d := &dropper{nth: 5}
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers}, grpc.StreamInterceptor(d.intercept))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := checker.Run(ctx, checker.Config{
		Target: addr, Topic: newTopic(t, k), Scenario: checker.Throughput, Streams: 1, Batch: 10, Inflight: 1,
		Warmup: -1, Duration: 300 * time.Millisecond, Groups: 2, Members: 1, DrainTimeout: 2 * time.Second,
	}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if d.dropped.Load() != 1 {
		t.Fatalf("the interceptor dropped %d messages, want 1", d.dropped.Load())
	}
	if res.OK() || res.Delivery.Lost != 2 { // one message, missed by each of 2 groups
		t.Fatalf("OK %v with %d lost: want 2 (the dropped message, in each group)", res.OK(), res.Delivery.Lost)
	}
	// The first request is the stream's first message (seq 0); the 5th
	// is the 4th batch of 10: its first message is seq 1+3*10 = 31.
	if len(res.Delivery.Sample) == 0 || res.Delivery.Sample[0] != "0/31" {
		t.Fatalf("lost sample %v, want 0/31 first", res.Delivery.Sample)
	}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "FAILED: 2 acked message(s) never received") {
		t.Fatalf("the summary does not say what was lost:\n%s", out.String())
	}
}

func TestEchoScenario(t *testing.T) {
	addr := startGateway(t, gateway.Config{Echo: true})
	res, err := checker.Run(context.Background(), checker.Config{
		Target: addr, Scenario: checker.Echo, Streams: 4, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.MsgsPerSec == 0 || res.Batch != 1 || res.Inflight != 1 || res.Connections != 4 || res.Delivery != nil || !res.OK() {
		t.Fatalf("unexpected echo result: %+v", res)
	}
	if res.MsgsPerSec != res.BatchesPerSec {
		t.Fatalf("echo sends one message per request: %.0f msgs/s vs %.0f requests/s", res.MsgsPerSec, res.BatchesPerSec)
	}
}

// TestUnknownTopicEndsTheRun: the first message on each stream tells
// whether the topic exists; the error says so instead of a run of errors.
func TestUnknownTopicEndsTheRun(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers})
	_, err := checker.Run(context.Background(), checker.Config{Target: addr, Topic: "no-such-topic", Streams: 2, Duration: time.Second}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("got %v, want the gateway's NotFound", err)
	}
}

func TestGatewayMemory(t *testing.T) {
	rss := int64(100 << 20)
	var mu sync.Mutex
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss)
		rss += 10 << 20 // the second reading: 10 MiB more
	}))
	defer metrics.Close()
	addr := startGateway(t, gateway.Config{Echo: true})
	res, err := checker.Run(context.Background(), checker.Config{
		// Each ticker stream's first tick falls at a random phase of its
		// interval: at an hour, one of 100 streams ticked within the 50 ms
		// run about once in 700 runs, and sent a second message.
		Target: addr, Scenario: checker.Ticker, Streams: 100, Connections: 10, Interval: 1000 * time.Hour,
		Warmup: -1, Duration: 50 * time.Millisecond, GatewayMetrics: metrics.URL, Settle: 10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Gateway; g == nil || g.RSSBeforeMB != 100 || g.RSSOpenMB != 110 || g.KBPerStream != 102.4 {
		t.Fatalf("gateway memory %+v, want 100 MB -> 110 MB, 102.4 KB per stream", res.Gateway)
	}
	if res.Connections != 10 || res.Acked != 100 {
		t.Fatalf("%d connections, %d acked: want 10 and one first message per stream", res.Connections, res.Acked)
	}
}

func TestMainUsageAndJSON(t *testing.T) {
	addr := startGateway(t, gateway.Config{Echo: true})
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"bad scenario", []string{"--target", addr, "--scenario", "nope"}, 2, ""},
		{"echo with groups", []string{"--target", addr, "--scenario", "echo", "--groups", "1"}, 2, ""},
		{"stray argument", []string{"extra"}, 2, ""},
		{"kill-every without a gateway to kill", []string{"--target", addr, "--kill-every", "1s"}, 2, ""},
		{"gateway-cmd and fault-cmd", []string{"--target", addr, "--kill-every", "1s", "--gateway-cmd", "x", "--fault-cmd", "y"}, 2, ""},
		{"fault-cmd without kill-every", []string{"--target", addr, "--fault-cmd", "y"}, 2, ""},
		{"kill-every longer than the run", []string{"--target", addr, "--kill-every", "20s", "--fault-cmd", "true"}, 2, ""},
		{"echo json", []string{"--target", addr, "--scenario", "echo", "--streams", "2", "--warmup", "0", "--duration", "200ms", "--json", "--quiet"}, 0, `"scenario": "echo"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := checker.Main(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.out) {
				t.Fatalf("stdout lacks %q:\n%s", tt.out, stdout.String())
			}
			if tt.code == 0 {
				var res checker.Result
				if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.WarmupS != 0 {
					t.Fatalf("JSON %v, warm-up %v (asked none)", err, res.WarmupS)
				}
			}
		})
	}
}

// eagerCommitter is a stream interceptor that gives the gateway the bug
// the checker must catch on the subscribe side: it acks the first batch
// of messages the gateway delivers, on the member's behalf, as it is sent
// (so the gateway commits past it), and then ends that stream before the
// member could ack. Those messages are never delivered again: the member
// received them, but no member ever processed them.
type eagerCommitter struct {
	fired atomic.Bool
	acked atomic.Int64 // messages acked on the member's behalf
}

func (c *eagerCommitter) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !strings.HasSuffix(info.FullMethod, "/Subscribe") {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	s := &eagerStream{ServerStream: ss, c: c, ctx: ctx, cancel: cancel, inject: make(chan []*databusv1.Ack, 1), pump: make(chan pumped)}
	go s.pumpAcks()
	return handler(srv, s)
}

type pumped struct {
	acks []*databusv1.Ack
	err  error
}

type eagerStream struct {
	grpc.ServerStream
	c      *eagerCommitter
	ctx    context.Context
	cancel context.CancelFunc
	inject chan []*databusv1.Ack
	pump   chan pumped
}

func (s *eagerStream) Context() context.Context { return s.ctx }

// pumpAcks reads the member's acks, so RecvMsg can also return injected
// ones.
func (s *eagerStream) pumpAcks() {
	for {
		var req databusv1.SubscribeRequest
		err := s.ServerStream.RecvMsg(&req)
		select {
		case s.pump <- pumped{req.Acks, err}:
		case <-s.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *eagerStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	resp, ok := m.(*databusv1.SubscribeResponse)
	if err != nil || !ok || len(resp.Messages) == 0 || !s.c.fired.CompareAndSwap(false, true) {
		return err
	}
	acks := make([]*databusv1.Ack, len(resp.Messages))
	for i, msg := range resp.Messages {
		acks[i] = &databusv1.Ack{Partition: msg.Partition, Offset: msg.Offset}
	}
	s.c.acked.Store(int64(len(acks)))
	s.inject <- acks
	// The stream ends once the gateway took the acks and committed them
	// (its commit interval here is 50 ms): the member's own ack, a second
	// later, fails, so the messages count as never received. Ended at
	// once, the gateway could drop the stream's window before applying
	// the acks and deliver the messages again, which is no loss.
	time.AfterFunc(500*time.Millisecond, s.cancel)
	return nil
}

func (s *eagerStream) RecvMsg(m any) error {
	req := m.(*databusv1.SubscribeRequest)
	select {
	case acks := <-s.inject:
		req.Acks = acks
		return nil
	default:
	}
	select {
	case acks := <-s.inject:
		req.Acks = acks
		return nil
	case p := <-s.pump:
		req.Acks = p.acks
		return p.err
	case <-s.ctx.Done():
		select {
		case acks := <-s.inject:
			req.Acks = acks
			return nil
		default:
			return io.EOF
		}
	}
}

// TestCommitPastUnackedIsReportedLost: the verification catches a gateway
// that commits messages its member never acked. The checker used to count
// a message as received when it arrived, before its ack, so these came
// out as delivered.
func TestCommitPastUnackedIsReportedLost(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	c := &eagerCommitter{}
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 50 * time.Millisecond}, grpc.StreamInterceptor(c.intercept))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Consumers start after publishing, so the first batch is a full one;
	// each batch is processed for a second, long after the gateway ended
	// the stream it came on, so its ack fails.
	res, err := checker.Run(ctx, checker.Config{
		Target: addr, Topic: newTopic(t, k), Scenario: checker.Ticker, Streams: 5, Interval: 100 * time.Millisecond,
		Warmup: -1, Duration: 500 * time.Millisecond, Groups: 1, Members: 1, SubBatch: 10,
		ProcessDelay: time.Second, Consume: checker.After, DrainTimeout: 20 * time.Second,
	}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	acked := c.acked.Load()
	if acked == 0 {
		t.Fatal("the interceptor acked nothing on the member's behalf")
	}
	if res.OK() || res.Delivery.Lost != acked {
		t.Fatalf("OK %v with %d lost: want the %d messages committed without the member's ack", res.OK(), res.Delivery.Lost, acked)
	}
	t.Logf("%d of %d acked messages lost, as they should be; %d received and acked", res.Delivery.Lost, res.Delivery.Acked, res.Delivery.Received)
}

// TestKillEverySigkillsTheGateway: the checker runs the gateway as a
// process, SIGKILLs it on schedule while publishing and consuming, starts
// it again on the same address, and still verifies that every acked
// message reached every group.
func TestKillEverySigkillsTheGateway(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		target := testkit.FreeAddr(t)
		// 6s: the shortest session a real broker allows by default. It is
		// how long a group waits for the member a SIGKILL left behind.
		gwCmd := fmt.Sprintf("exec %s --brokers %s --grpc-addr %s --http-addr %s --session-timeout 6s --commit-interval 200ms",
			bin, strings.Join(k.Brokers, ","), target, testkit.FreeAddr(t))
		var log testkit.SyncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := checker.Run(ctx, checker.Config{
			// About 1,000 messages/s: consumers under -race on 2 cores keep
			// up. Kills 8s apart: each lands on groups settled after the
			// previous one (the dead member's 6s session expired); see
			// Config.KillEvery for what kfake does otherwise.
			Target: target, Topic: newTopic(t, k), Scenario: checker.Ticker, Streams: 10, Interval: 10 * time.Millisecond,
			Warmup: -1, Duration: 17 * time.Second, Groups: 2, Members: 1, DrainTimeout: 90 * time.Second,
			KillEvery: 8 * time.Second, GatewayCmd: gwCmd, GatewayLog: &log,
		}, t.Logf)
		if err != nil {
			t.Fatalf("%v\ngateway log:\n%s", err, log.String())
		}
		summary(t, res)
		if len(res.Faults) != 2 {
			t.Fatalf("%d faults injected, want 2 (at 8s and 16s of 17s): %+v", len(res.Faults), res.Faults)
		}
		pids := map[int]bool{}
		for _, f := range res.Faults {
			if f.Kind != "sigkill" || f.PID <= 0 || f.Error != "" || f.DownS <= 0 {
				t.Fatalf("fault %+v: want a SIGKILL of a pid, the gateway back after it", f)
			}
			if err := syscall.Kill(f.PID, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("pid %d still exists after its SIGKILL (kill -0: %v)", f.PID, err)
			}
			pids[f.PID] = true
		}
		if len(pids) != 2 {
			t.Fatalf("the same process killed twice: %+v", res.Faults)
		}
		// A gateway that gets SIGTERM drains and says so; a SIGKILLed one
		// says nothing. Three gateways served; only the last was stopped.
		if n := strings.Count(log.String(), "databus gateway serving gRPC"); n != 3 {
			t.Fatalf("%d gateways served, want 3 (the first and one per kill):\n%s", n, log.String())
		}
		if n := strings.Count(log.String(), "databus gateway draining"); n != 1 {
			t.Fatalf("%d gateways drained, want only the last one (the killed ones must die at once):\n%s", n, log.String())
		}
		d := res.Delivery
		if !res.OK() || d.Lost != 0 || res.Acked == 0 || d.Acked != res.Acked {
			t.Fatalf("OK %v: %d acked (ledger %d), %d lost (first: %v)", res.OK(), res.Acked, d.Acked, d.Lost, d.Sample)
		}
		raw, _ := json.Marshal(res)
		if !strings.Contains(string(raw), `"kind":"sigkill"`) {
			t.Fatalf("the JSON result does not list the faults: %s", raw)
		}
	})
}

// TestFaultCmd: --fault-cmd runs on schedule; one that fails makes the
// run not OK, since the fault asked for was not injected.
func TestFaultCmd(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
	for _, tt := range []struct {
		name, cmd string
		ok        bool
	}{
		{"succeeds", "echo fault >> %s", true},
		{"fails", "echo no >> %s; exit 3", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "faults")
			res, err := checker.Run(context.Background(), checker.Config{
				Target: addr, Topic: newTopic(t, k), Scenario: checker.Latency, Streams: 1,
				Warmup: -1, Duration: 700 * time.Millisecond, Groups: 1, DrainTimeout: 30 * time.Second,
				KillEvery: 200 * time.Millisecond, FaultCmd: fmt.Sprintf(tt.cmd, file),
			}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			ran, _ := os.ReadFile(file)
			if n := strings.Count(string(ran), "\n"); len(res.Faults) != 3 || n != 3 {
				t.Fatalf("%d faults reported, the command ran %d times: want 3 (at 0.2s, 0.4s, 0.6s of 0.7s)", len(res.Faults), n)
			}
			for _, f := range res.Faults {
				if f.Kind != "command" || (f.Error == "") != tt.ok {
					t.Fatalf("fault %+v", f)
				}
			}
			if res.OK() != tt.ok || res.Delivery.Lost != 0 {
				t.Fatalf("OK %v with %d lost, want OK %v", res.OK(), res.Delivery.Lost, tt.ok)
			}
			out := summary(t, res)
			if !strings.Contains(out, "faults:    3 --fault-cmd runs") {
				t.Fatalf("the summary does not list the faults:\n%s", out)
			}
		})
	}
}

// TestDropMemberRedelivers: each fault resets the connection of a member
// holding a batch it has not acked; the gateway must deliver that batch
// again (to it, back as a new member, or to the other member), so nothing
// acked is lost.
func TestDropMemberRedelivers(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := checker.Run(ctx, checker.Config{
			Target: addr, Topic: newTopic(t, k), Scenario: checker.Ticker, Streams: 10, Interval: 10 * time.Millisecond,
			Warmup: -1, Duration: 3500 * time.Millisecond, Groups: 1, Members: 2, SubBatch: 10, DrainTimeout: 60 * time.Second,
			KillEvery: time.Second, DropMember: true,
		}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		out := summary(t, res)
		if len(res.Faults) != 3 {
			t.Fatalf("%d faults, want 3: %+v", len(res.Faults), res.Faults)
		}
		for _, f := range res.Faults {
			if f.Kind != "member" || f.Held <= 0 || f.Error != "" {
				t.Fatalf("fault %+v: want a member dropped holding messages", f)
			}
		}
		if d := res.Delivery; !res.OK() || d.Lost != 0 || d.Acked == 0 {
			t.Fatalf("OK %v: %d acked, %d lost (first: %v)", res.OK(), d.Acked, d.Lost, d.Sample)
		}
		if !strings.Contains(out, "members dropped") {
			t.Fatalf("the summary does not list the faults:\n%s", out)
		}
	})
}

// TestInjectWhileConsuming: an Inject function runs on schedule while
// --consume after members drain the topic, not while publishing; a run
// whose drain ends before the first fault is not OK.
func TestInjectWhileConsuming(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
	for _, tt := range []struct {
		name   string
		every  time.Duration
		faults bool
	}{
		{"faults while draining", 500 * time.Millisecond, true},
		{"drained before the first fault", 50 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var publishEnded atomic.Bool
			var during atomic.Int64
			res, err := checker.Run(context.Background(), checker.Config{
				// About 30 messages, drained one per 100 ms: 3 s.
				Target: addr, Topic: newTopic(t, k), Scenario: checker.Ticker, Streams: 1, Interval: 10 * time.Millisecond,
				Warmup: -1, Duration: 300 * time.Millisecond, Groups: 1, SubBatch: 1, ProcessDelay: 100 * time.Millisecond,
				Consume: checker.After, DrainTimeout: 30 * time.Second,
				KillEvery: tt.every, MaxFaults: 2, FaultPhase: checker.ConsumePhase,
				OnWindow: func(open bool) { publishEnded.Store(!open) },
				Inject: func(context.Context) error {
					if !publishEnded.Load() {
						return errors.New("injected while publishing")
					}
					during.Add(1)
					return nil
				},
			}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			out := summary(t, res)
			if tt.faults {
				if len(res.Faults) != 2 || during.Load() != int64(len(res.Faults)) || !res.OK() || res.Faults[0].Kind != "injected" {
					t.Fatalf("OK %v, faults %+v, %d injected while consuming", res.OK(), res.Faults, during.Load())
				}
			} else if res.OK() || len(res.Faults) != 0 || !strings.Contains(out, "no fault was injected") {
				t.Fatalf("OK %v with %d faults: a run whose faults never fell must not be OK:\n%s", res.OK(), len(res.Faults), out)
			}
			if res.Delivery.Lost != 0 {
				t.Fatalf("%d lost", res.Delivery.Lost)
			}
		})
	}
}

func TestFaultConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  checker.Config
		want string
	}{
		{checker.Config{KillEvery: time.Second, DropMember: true}, "needs consumer groups"},
		{checker.Config{KillEvery: time.Second, Groups: 1, FaultPhase: checker.ConsumePhase, DropMember: true}, "--consume after"},
		{checker.Config{KillEvery: time.Second, Groups: 1, DropMember: true, FaultCmd: "true"}, "one way to inject"},
		{checker.Config{Groups: 1, DropMember: true}, "give --kill-every"},
		{checker.Config{KillEvery: time.Second, FaultPhase: "later", GatewayCmd: "x"}, "fault phase"},
	} {
		tt.cfg.Target = "127.0.0.1:1"
		_, err := checker.Run(context.Background(), tt.cfg, nil)
		if !errors.Is(err, checker.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an ErrConfig saying %q", tt.cfg, err, tt.want)
		}
	}
}
