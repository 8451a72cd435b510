package gateway_test

// Soak checks: the gateway as a process of its own ("hlab serve
// databus"), in front of kfake as another ("hlab serve kfake"), measured
// from outside through /proc. They take minutes and want a quiet machine,
// so they run only with HLAB_SOAK=1:
//
//	HLAB_SOAK=1 go test ./internal/gateway -run TestNeverAckedOneMemory -v -timeout 30m
//	HLAB_SOAK=1 go test ./internal/gateway -run TestTenThousandSubscribeStreams -v -timeout 30m
//	HLAB_SOAK=1 go test ./internal/gateway -run TestSizedGatewayHoldsItsLimits -v -timeout 10m
//
// HLAB_BIN=bin/hlab (absolute, or relative to the repository's root)
// uses that binary instead of building one (go build -o bin/hlab
// ./cmd/hlab). The figures are printed with t.Log
// (hence -v); the assertions are the gateway's stated bounds on memory and goroutines.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

// soak skips t unless HLAB_SOAK is set.
func soak(t *testing.T) {
	t.Helper()
	if os.Getenv("HLAB_SOAK") == "" {
		t.Skip("a soak check: set HLAB_SOAK=1 to run it (minutes; run it on a quiet machine)")
	}
}

// soakEnvInt reads an integer knob of a soak check.
func soakEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: give a positive whole number", name, v)
	}
	return n
}

// soakProc is an "hlab serve" process of a soak check.
type soakProc struct {
	proc *sandbox.Process
	http string // its --addr
}

func (p *soakProc) pid() int { return p.proc.PID() }

// serve starts "hlab serve name --addr ... args..." under cpu cores (0: no
// quota) and waits for its /healthz.
func serve(t *testing.T, sb *sandbox.Sandbox, bin, name string, cpu float64, args ...string) *soakProc {
	t.Helper()
	addr := testkit.FreeAddr(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	proc, err := sb.Start(context.Background(), sandbox.Spec{
		Name: "soak-" + name, Path: bin, CPU: cpu,
		Args:   append([]string{"serve", name, "--addr", addr}, args...),
		Stdout: logf, Stderr: logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := deps.AwaitHTTP(ctx, "http://"+addr+"/healthz", 30*time.Second, proc.Done()); err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("hlab serve %s did not start: %v\n%s", name, err, out)
	}
	return &soakProc{proc: proc, http: addr}
}

// startSoakKafka starts kfake as a process with topic of partitions and
// returns it and its Kafka address.
func startSoakKafka(t *testing.T, sb *sandbox.Sandbox, bin, topic string, partitions int) (*soakProc, string) {
	t.Helper()
	broker := testkit.FreeAddr(t)
	k := serve(t, sb, bin, "kfake", 0, "--kafka-addr", broker, "--topics", topic, "--partitions", strconv.Itoa(partitions))
	return k, broker
}

// startSoakGateway starts the gateway in front of broker and returns it
// and its gRPC address.
func startSoakGateway(t *testing.T, sb *sandbox.Sandbox, bin, broker string, cpu float64, args ...string) (*soakProc, string) {
	t.Helper()
	grpcAddr := testkit.FreeAddr(t)
	g := serve(t, sb, bin, "databus", cpu, append([]string{"--grpc-addr", grpcAddr, "--brokers", broker}, args...)...)
	return g, grpcAddr
}

// rssMB is the process's resident memory now, read by its sandbox.
func (p *soakProc) rssMB() float64 { return p.proc.Measure().Stop().RSSMBMax }

// tcpConnsTo counts pid's established TCP connections to port on the
// loopback: its socket inodes (/proc/PID/fd) matched against
// /proc/net/tcp.
func tcpConnsTo(t *testing.T, pid, port int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	n := 0
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] {
				continue
			}
			_, remPort, ok := strings.Cut(f[2], ":")
			if p, err := strconv.ParseInt(remPort, 16, 32); ok && err == nil && int(p) == port {
				n++
			}
		}
	}
	return n
}

// produceSoak writes n small records (keys "0".."n-1") straight to Kafka
// at broker, from this process, so that the gateway's memory shows only
// what subscribing costs it.
func produceSoak(t *testing.T, broker, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(100000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	value := bytes.Repeat([]byte("v"), 100)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		t.Fatalf("producing %d records: %v", n, *err)
	}
	t.Logf("produced %d records of 100 bytes to %s in %v", n, topic, time.Since(start).Round(time.Millisecond))
}

// TestNeverAckedOneMemory: a subscriber acks 1,000,000 messages, then
// never acks the next one while it acks every one after it. Delivery to
// its stream must stop at its cap (--max-unacked, 1000) past the unacked
// message, and the gateway's RSS must stay within 50 MB of what it was
// before the subscriber came. (The defect: the stream kept receiving,
// and the gateway kept every offset after the gap, growing without
// bound.) HLAB_SOAK_ACKED sets how many are acked first.
func TestNeverAckedOneMemory(t *testing.T) {
	soak(t)
	const (
		topic      = "soak-unacked"
		maxUnacked = 1000 // the gateway's default --max-unacked
		maxGrow    = 50.0 // MB
	)
	ackedFirst := soakEnvInt(t, "HLAB_SOAK_ACKED", 1_000_000)
	total := ackedFirst + 1 + maxUnacked + 10_000 // enough to run far past the cap were it not kept
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	_, broker := startSoakKafka(t, sb, bin, topic, 1)
	gw, grpcAddr := startSoakGateway(t, sb, bin, broker, 0)
	produceSoak(t, broker, topic, total)

	c, err := databus.Dial(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	time.Sleep(time.Second) // let the gateway settle after its start
	startRSS := gw.rssMB()
	peak := gw.proc.Measure() // the sandbox samples its RSS every 100 ms
	sub, err := c.OpenSubscription(ctx, topic, "soak", databus.MaxUnacked(maxUnacked))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	var delivered, acked atomic.Int64
	recvErr := ackAllButOne(sub, ackedFirst, func(batch []databus.Delivery, unacked *databus.Delivery) {
		delivered.Add(int64(len(batch)))
		acked.Add(int64(len(batch)))
		if unacked != nil {
			acked.Add(-1) // the one never acked
		}
	})
	// Until delivery stops for 5 s, or everything arrived.
	start := time.Now()
	last, since := int64(-1), time.Now()
	progress := time.Now()
	for {
		select {
		case err := <-recvErr:
			t.Fatalf("subscription ended after %d messages: %v", delivered.Load(), err)
		case <-ctx.Done():
			t.Fatalf("still delivering after %v: %d messages", time.Since(start), delivered.Load())
		case <-time.After(100 * time.Millisecond):
		}
		n := delivered.Load()
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(progress) > 10*time.Second {
			t.Logf("%d delivered so far, RSS %.1f MB", n, gw.rssMB())
			progress = time.Now()
		}
		if n >= int64(total) || time.Since(since) > 5*time.Second {
			break
		}
	}
	peakRSS := peak.Stop().RSSMBMax
	endRSS := gw.rssMB()
	m := testkit.Scrape(t, "http://"+gw.http+"/metrics")
	n := delivered.Load()
	t.Logf("gateway RSS: start %.1f MB, peak %.1f MB (+%.1f), end %.1f MB", startRSS, peakRSS, peakRSS-startRSS, endRSS)
	t.Logf("delivered %d of %d (%d acked first, then 1 never acked, cap %d): %d acked; the gateway holds %v offsets, %v unacked; delivery ran %v",
		n, total, ackedFirst, maxUnacked, acked.Load(), testkit.SumFamily(m["databus_held_offsets"], nil), testkit.SumFamily(m["databus_unacked_messages"], nil), since.Sub(start).Round(time.Millisecond))
	if want := int64(ackedFirst + maxUnacked); n != want {
		t.Errorf("delivered %d messages, want %d: %d acked, then the cap of %d from the unacked one on", n, want, ackedFirst, maxUnacked)
	}
	if grew := peakRSS - startRSS; grew > maxGrow {
		t.Errorf("gateway RSS grew %.1f MB (%.1f -> %.1f), more than %.0f MB", grew, startRSS, peakRSS, maxGrow)
	}
}

// TestTenThousandSubscribeStreams: 10,000 subscribe streams of one group,
// through one gateway under a quota of one CPU, over a few connections.
// Every stream is served, every message published arrives, and the group
// costs the gateway one Kafka client: it reports its RSS, its TCP
// connections to the broker, and databus_kafka_clients.
// HLAB_SOAK_STREAMS and HLAB_SOAK_CONNS change the shape.
func TestTenThousandSubscribeStreams(t *testing.T) {
	soak(t)
	const (
		topic      = "soak-streams"
		partitions = 10
		messages   = 20_000
	)
	streams := soakEnvInt(t, "HLAB_SOAK_STREAMS", 10_000)
	conns := soakEnvInt(t, "HLAB_SOAK_CONNS", 4)
	perConn := (streams + conns - 1) / conns
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	_, broker := startSoakKafka(t, sb, bin, topic, partitions)
	_, portStr, _ := strings.Cut(broker, ":")
	brokerPort, _ := strconv.Atoi(portStr)
	gw, grpcAddr := startSoakGateway(t, sb, bin, broker, 1,
		"--max-streams", strconv.Itoa(streams+1000), "--max-streams-per-conn", strconv.Itoa(perConn))
	if cores, enforced := gw.proc.CPUQuota(); enforced {
		t.Logf("gateway under a quota of %.1f CPU (%s)", cores, sb.Mechanism())
	} else {
		t.Logf("no CPU quota on this machine (%s): the gateway runs unconstrained", sb.Reason())
	}
	time.Sleep(time.Second)
	startRSS := gw.rssMB()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var clients []*databus.Client
	for range conns {
		c, err := databus.Dial(grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var (
		received keys
		owners   atomic.Int64 // streams that were given a partition
		wg       sync.WaitGroup
	)
	openStart := time.Now()
	for i := range streams {
		sub, err := clients[i%conns].OpenSubscription(ctx, topic, "soak")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				b, err := sub.Recv()
				if err != nil {
					return
				}
				if len(b.Assigned) > 0 {
					owners.Add(1)
				}
				received.add(b.Messages...)
				if sub.Ack(b.Messages...) != nil {
					return
				}
			}
		}()
	}
	testkit.EventuallyNil(t, 10*time.Minute, "every stream open on the gateway", func() error {
		if n := testkit.SumFamily(testkit.Scrape(t, "http://"+gw.http+"/metrics")["databus_streams"], map[string]string{"kind": "subscribe"}); int(n) != streams {
			return fmt.Errorf("%v of %d open", n, streams)
		}
		return nil
	})
	t.Logf("%d subscribe streams open over %d connections in %v", streams, conns, time.Since(openStart).Round(time.Millisecond))
	produceSoak(t, broker, topic, messages)
	received.await(t, 5*time.Minute, "every message received", messages, nil)
	time.Sleep(3 * time.Second) // idle: the figures of 10k open streams
	rss := gw.rssMB()
	kafkaConns := tcpConnsTo(t, gw.pid(), brokerPort)
	m := testkit.Scrape(t, "http://"+gw.http+"/metrics")
	members := testkit.SumFamily(m["databus_kafka_clients"], map[string]string{"kind": "member"})
	allClients := testkit.SumFamily(m["databus_kafka_clients"], nil)
	t.Logf("gateway RSS %.1f MB before the streams, %.1f MB with %d streams open (%.1f KB per stream)", startRSS, rss, streams, (rss-startRSS)*1024/float64(streams))
	t.Logf("Kafka: %d TCP connections from the gateway to the broker; %v Kafka clients for the group (member), %v in all (with the shared producer)", kafkaConns, members, allClients)
	t.Logf("%d messages received; %d streams were given a partition (%d partitions)", messages, owners.Load(), partitions)
	if members != 1 {
		t.Errorf("%v Kafka clients serve one group's %d streams, want 1", members, streams)
	}
	if kafkaConns > 8 {
		t.Errorf("%d connections to the broker for one group and the shared producer, want a few", kafkaConns)
	}
	cancel()
	for _, c := range clients {
		c.Close()
	}
	wg.Wait()
}
