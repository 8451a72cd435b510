package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

// vmKB reads a field of /proc/PID/status in KiB: VmRSS (resident now) or
// VmHWM (the most it has been resident).
func vmKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestReceiveBudgetBoundsRSS: 200 publish streams, on 20 connections,
// each send a batch of the largest size the gateway takes, all at once.
// Read only before Recv, --max-gateway-bytes let every one of them in
// (200 x 2 MiB, twice over while decoded); now a message is granted its
// bytes only when they fit, and the gateway's peak RSS stays within its
// budget and the stated margin:
//
//   - each stream's first 64 KiB (its flow-control window) arrives before
//     any grant: 200 x 64 KiB = 12.5 MiB (twice that at most, for
//     messages no larger than the window, which are not counted);
//   - a message being decoded is held twice for a moment (gRPC's buffers
//     and the batch's own copy), and one more may go alone;
//   - Go's collector lets the heap grow to twice what is live before it
//     collects (GOGC=100).
//
// So: peak RSS - RSS before <= 2 x (budget + 12.5 MiB + 2 batches) + 32
// MiB of runtime slack. Every batch must still be answered.
func TestReceiveBudgetBoundsRSS(t *testing.T) {
	const (
		streams  = 200
		conns    = 20
		batchMiB = 2
		budget   = 32 << 20
	)
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	grpcAddr := testkit.FreeAddr(t)
	g := serve(t, sb, bin, "databus", 0, "--grpc-addr", grpcAddr, "--echo",
		"--max-gateway-bytes", strconv.Itoa(budget), "--max-stream-bytes", strconv.Itoa(batchMiB<<20))

	batch := &databusv1.PublishRequest{BatchId: 1}
	for range batchMiB {
		batch.Messages = append(batch.Messages, &databusv1.Message{Value: bytes.Repeat([]byte("v"), 1<<20)}) // --max-message-bytes' default
	}
	apis := make([]databusv1.DataBusClient, conns)
	for i := range apis {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		apis[i] = databusv1.NewDataBusClient(cc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Every stream open (a first small batch answered) before the burst.
	pubs := make([]databusv1.DataBus_PublishClient, streams)
	for i := range pubs {
		if pubs[i], err = openPublishStream(ctx, apis[i%conns], gateway.MDTopic, "big"); err != nil {
			t.Fatal(err)
		}
	}
	before := vmKB(t, g.pid(), "VmRSS")
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for _, p := range pubs {
		wg.Go(func() {
			if err := p.Send(batch); err != nil {
				errs <- err
				return
			}
			resp, err := p.Recv()
			if err == nil && (resp.Stored != batchMiB || len(resp.Errors) > 0) {
				err = fmt.Errorf("answer %v: want %d stored", resp, batchMiB)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a stream's batch: %v", err)
	}
	peak := vmKB(t, g.pid(), "VmHWM")
	const margin = 2*(budget+streams*64<<10+2*batchMiB<<20) + 32<<20
	t.Logf("gateway RSS before %d MiB, peak %d MiB: %d MiB above, for %d MiB sent at once; bound %d MiB above",
		before>>10, peak>>10, (peak-before)>>10, streams*batchMiB, margin>>20)
	if (peak-before)<<10 > margin {
		t.Errorf("the gateway's peak RSS rose %d MiB, over its budget of %d MiB and the margin (%d MiB in all)", (peak-before)>>10, budget>>20, margin>>20)
	}
}

// stallConn is a client connection that stops writing after its first
// left bytes, as a client that announces a large message and never sends
// it.
type stallConn struct {
	net.Conn
	left  atomic.Int64
	stall chan struct{}
}

func (c *stallConn) Write(p []byte) (int, error) {
	left := c.left.Add(-int64(len(p))) + int64(len(p))
	if left >= int64(len(p)) {
		return c.Conn.Write(p)
	}
	n := 0
	if left > 0 {
		n, _ = c.Conn.Write(p[:left])
	}
	<-c.stall
	return n, net.ErrClosed
}

// TestSlowSenderLosesItsConnection: a client granted a large message that
// never sends it holds budget others wait for; its connection is closed
// after the slow-sender allowance, and the client waiting gets its answer.
func TestSlowSenderLosesItsConnection(t *testing.T) {
	gateway.SetSlowSenderBase(t, time.Second)
	reg := prometheus.NewRegistry()
	addr := gatewaytest.Start(t, gateway.Config{Echo: true, Registry: reg, MaxGatewayBytes: 4 << 20, MaxStreamBytes: 3 << 20}, gateway.ServerOptions{})
	batch := &databusv1.PublishRequest{BatchId: 1}
	for range 3 {
		batch.Messages = append(batch.Messages, &databusv1.Message{Value: bytes.Repeat([]byte("v"), 1<<20)})
	}
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	slowCC, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			sc := &stallConn{Conn: c, stall: stall}
			sc.left.Store(1 << 20) // the preface, a first batch, and a bit of the large one
			return sc, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slowCC.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slow, err := openPublishStream(ctx, databusv1.NewDataBusClient(slowCC), gateway.MDTopic, "big")
	if err != nil {
		t.Fatal(err)
	}
	go slow.Send(batch) // stalls part way
	granted := func() float64 {
		return testkit.MetricSum(t, reg, "databus_receive_bytes_granted", nil)
	}
	testkit.Eventually(t, 15*time.Second, "the slow client's grant", func() bool { return granted() >= 3<<20 })

	fast := dial(t, addr)
	pub, err := fast.NewPublisher(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	start := time.Now()
	msgs := make([]databus.Message, 3)
	for i := range msgs {
		msgs[i] = databus.Message{Value: batch.Messages[i].Value}
	}
	if err := pub.Publish(ctx, msgs...); err != nil {
		t.Fatalf("the waiting client's batch: %v", err)
	}
	t.Logf("answered after %v", time.Since(start).Round(time.Millisecond))
	if n := testkit.MetricSum(t, reg, "databus_slow_sender_closes_total", nil); n != 1 {
		t.Errorf("databus_slow_sender_closes_total = %v, want 1", n)
	}
}

// TestWindowSizedBatchesLeakNoBudget: batches a little smaller than the
// stream window may arrive whole before gRPC's credit for them goes out;
// a stream sending many must leave nothing counted behind, or the budget
// would drain batch by batch until every large batch waited for ever.
func TestWindowSizedBatchesLeakNoBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	addr := gatewaytest.Start(t, gateway.Config{Echo: true, Registry: reg, MaxGatewayBytes: 1 << 20}, gateway.ServerOptions{})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := openPublishStream(ctx, databusv1.NewDataBusClient(cc), gateway.MDTopic, "t")
	if err != nil {
		t.Fatal(err)
	}
	// Sent back to back, 16 in flight (the stream's default), answers
	// read as they come: the windows of the batches overlap.
	sizes := []int{50 << 10, 56 << 10, 62 << 10, 63 << 10}
	const each = 100
	sent := make(chan error, 1)
	go func() {
		for i, size := range sizes {
			for j := range each {
				if err := s.Send(&databusv1.PublishRequest{BatchId: uint64(1000*i + j), Messages: []*databusv1.Message{{Value: make([]byte, size)}}}); err != nil {
					sent <- err
					return
				}
			}
		}
		sent <- nil
	}()
	for range len(sizes) * each {
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if n := testkit.MetricSum(t, reg, "databus_receive_bytes_granted", nil); n != 0 {
		t.Errorf("%v bytes still counted after every batch was answered; want 0", n)
	}
	big := &databusv1.PublishRequest{BatchId: 9999, Messages: []*databusv1.Message{{Value: make([]byte, 900<<10)}}}
	if err := s.Send(big); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("a 900 KiB batch in a 1 MiB budget: %v", err)
	}
}
