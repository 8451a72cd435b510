package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testcerts"
	"github.com/highload-lab/hlab/internal/testkit"
)

// tokensGateway serves a gateway of cfg checking the tokens of file (a
// tokens file's text), and returns its address.
func tokensGateway(t *testing.T, cfg gateway.Config, file string) string {
	t.Helper()
	ts, err := gateway.ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.Start(t, cfg, gateway.ServerOptions{Auth: &gateway.Auth{Tokens: ts}})
}

// noSecretInMetrics fails t if a series of reg shows any of secrets:
// metrics carry a token's name, never the token.
func noSecretInMetrics(t *testing.T, reg *prometheus.Registry, secrets ...string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	all := fmt.Sprint(mfs)
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Fatalf("the metrics show the token %q", s)
		}
	}
}

// publishOutcome is what one client saw of its messages.
type publishOutcome struct {
	elapsed          time.Duration // from the first batch sent to the last answer
	answered, stored int           // batches answered, messages stored
	errs             []error
}

// publishOver publishes n messages keyed prefix-i, as fast as it can, in
// batches of batch on streams publishers of c, and waits for every answer.
func publishOver(ctx context.Context, t *testing.T, c *databus.Client, topic, prefix string, n, batch, streams int) publishOutcome {
	t.Helper()
	var (
		mu  sync.Mutex
		out publishOutcome
		wg  sync.WaitGroup
	)
	start := time.Now()
	for s := range streams {
		pub, err := c.NewPublisher(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := s * batch; first < n; first += streams * batch {
				ms := make([]databus.Message, min(batch, n-first))
				for i := range ms {
					ms[i] = databus.Message{Key: fmt.Appendf(nil, "%s-%d", prefix, first+i), Value: []byte("v")}
				}
				wg.Add(1)
				err := pub.PublishAsync(ctx, ms, func(err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					out.answered++
					var pe *databus.PublishError
					switch {
					case err == nil:
						out.stored += len(ms)
					case errors.As(err, &pe):
						out.stored += len(ms) - len(pe.Records)
						out.errs = append(out.errs, err)
					default:
						out.errs = append(out.errs, err)
					}
				})
				if err != nil {
					wg.Done()
					mu.Lock()
					out.errs = append(out.errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	return out
}

// TestTokenPublishRate: a token at publish-rate=200 publishing 1,000
// messages as fast as it can over 2 streams is slowed to its rate (at
// least (1000 - the burst of 200 - a batch per stream) / 200 = 3.9 s),
// not refused: every batch is answered and Kafka holds each message once.
// An unlimited token publishing beside it is not slowed at all.
func TestTokenPublishRate(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic := newTopic(t, k, 2)
	reg := prometheus.NewRegistry()
	addr := tokensGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg},
		"limited-s3cret publish=* name=limited publish-rate=200\nfree-s3cret publish=* name=free\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const total, batch, streams, rate = 1000, 10, 2, 200
	var free publishOutcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		free = publishOver(ctx, t, dial(t, addr, databus.WithToken("free-s3cret"), databus.WithPlaintextToken()), topic, "free", total, batch, streams)
	}()
	limited := publishOver(ctx, t, dial(t, addr, databus.WithToken("limited-s3cret"), databus.WithPlaintextToken()), topic, "limited", total, batch, streams)
	<-done

	for name, o := range map[string]publishOutcome{"limited": limited, "free": free} {
		if len(o.errs) > 0 || o.answered != total/batch || o.stored != total {
			t.Errorf("%s: %d of %d batches answered, %d of %d messages stored, errors %v", name, o.answered, total/batch, o.stored, total, o.errs)
		}
	}
	floor := time.Duration(float64(total-rate-streams*batch) / rate * float64(time.Second))
	t.Logf("limited: %v for %d messages (at least %v at %d/s); free: %v", limited.elapsed, total, floor, rate, free.elapsed)
	if limited.elapsed < floor {
		t.Errorf("a token at publish-rate=%d published %d messages in %v: not slowed to its rate (at least %v)", rate, total, limited.elapsed, floor)
	}

	got := readAll(t, k, topic)
	for _, prefix := range []string{"limited", "free"} {
		lost, dups := 0, 0
		for i := range total {
			switch n := got[fmt.Sprintf("%s-%d", prefix, i)]; {
			case n == 0:
				lost++
			case n > 1:
				dups += n - 1
			}
		}
		t.Logf("%s: %d lost, %d duplicates in Kafka", prefix, lost, dups)
		if lost > 0 || dups > 0 {
			t.Errorf("%s: %d lost, %d duplicates, want none", prefix, lost, dups)
		}
	}

	throttled := func(name string) float64 {
		return testkit.MetricSum(t, reg, "databus_token_throttled_seconds_total", map[string]string{"token": name})
	}
	if throttled("limited") <= 0 {
		t.Error("the limited token's streams waited, but databus_token_throttled_seconds_total{token=limited} is 0")
	}
	if s := throttled("free"); s != 0 {
		t.Errorf("the unlimited token was throttled for %v s", s)
	}
	for _, name := range []string{"limited", "free"} {
		if n := testkit.MetricSum(t, reg, "databus_token_published_messages_total", map[string]string{"token": name}); n != total {
			t.Errorf("databus_token_published_messages_total{token=%s} = %v, want %d", name, n, total)
		}
	}
	noSecretInMetrics(t, reg, "limited-s3cret", "free-s3cret")
}

// TestTokenMaxStreams: a token at max-streams=2 holding a subscribe and a
// publish stream is refused a third with ResourceExhausted naming the
// quota and its name, counted; once one ends (closed, or its connection
// reset), a new one is accepted.
func TestTokenMaxStreams(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	reg := prometheus.NewRegistry()
	addr := tokensGateway(t, gateway.Config{Brokers: k.Brokers, Registry: reg},
		"billing-s3cret publish=* subscribe=* groups=* name=billing max-streams=2\nother-s3cret publish=* name=other\n")
	api := rawConn(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	auth := []string{"authorization", "Bearer billing-s3cret", gateway.MDTopic, topic}
	streams := func() float64 {
		return testkit.MetricSum(t, reg, "databus_token_streams", map[string]string{"token": "billing"})
	}

	sub, err := api.Subscribe(metadata.AppendToOutgoingContext(ctx, append(auth, gateway.MDGroup, "g")...))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.CloseSend()
	testkit.Eventually(t, 30*time.Second, "the subscribe stream counted", func() bool { return streams() == 1 })
	pub, err := openPublishStream(ctx, api, auth...)
	if err != nil {
		t.Fatalf("second stream: %v", err)
	}
	_, err = openPublishStream(ctx, api, auth...)
	refusal(t, err, "token billing holds its max-streams=2 streams on this gateway: close one, or raise max-streams in the tokens file")
	if n := testkit.MetricSum(t, reg, "databus_token_refused_total", map[string]string{"token": "billing", "quota": "max-streams"}); n != 1 {
		t.Errorf("databus_token_refused_total{token=billing,quota=max-streams} = %v, want 1", n)
	}
	// Another token's streams are its own.
	if _, err := openPublishStream(ctx, api, "authorization", "Bearer other-s3cret", gateway.MDTopic, topic); err != nil {
		t.Fatalf("another token's stream: %v", err)
	}

	if err := pub.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := pub.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("closing the publish stream: %v", err)
		}
	}
	testkit.Eventually(t, 30*time.Second, "the closed stream's place given back", func() bool { return streams() == 1 })
	// A stream whose connection dies (reset, not closed) gives its place
	// back too.
	proxy := testkit.NewProxy(t, addr)
	if _, err := openPublishStream(ctx, rawConn(t, proxy.Addr()), auth...); err != nil {
		t.Fatalf("a stream after one closed: %v", err)
	}
	proxy.Cut()
	testkit.Eventually(t, 30*time.Second, "the reset stream's place given back", func() bool { return streams() == 1 })
	if _, err := openPublishStream(ctx, api, auth...); err != nil {
		t.Fatalf("a stream after one was reset: %v", err)
	}
	noSecretInMetrics(t, reg, "billing-s3cret", "other-s3cret")
}

// TestTokenRateReload: a reload of the tokens file that raises a token's
// publish-rate applies at once, to a stream already waiting at the old
// rate (which would have held it for 99 s).
func TestTokenRateReload(t *testing.T) {
	dir := t.TempDir()
	path := testcerts.WriteFile(t, dir, "tokens", "rl-s3cret publish=* name=rl publish-rate=1\n")
	auth, err := gateway.AuthFiles{Tokens: path}.Load()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	addr := gatewaytest.Start(t, gateway.Config{Echo: true, Registry: reg}, gateway.ServerOptions{Auth: auth})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := rawConn(t, addr).Publish(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer rl-s3cret", gateway.MDTopic, "t"))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(id uint64) *databusv1.PublishRequest {
		req := &databusv1.PublishRequest{BatchId: id}
		for range 100 {
			req.Messages = append(req.Messages, &databusv1.Message{Value: []byte("v")})
		}
		return req
	}
	// The first batch passes (a batch is let through whole) and leaves
	// 99 messages owed at 1 a second: the second waits to be read.
	for id := uint64(1); id <= 2; id++ {
		if err := s.Send(batch(id)); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := s.Recv(); err != nil || resp.BatchId != 1 || resp.Stored != 100 {
		t.Fatalf("first batch: %v, %v", resp, err)
	}
	testcerts.WriteFile(t, dir, "tokens", "rl-s3cret publish=* name=rl publish-rate=10000000\n")
	if err := auth.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Recv(); err != nil || resp.BatchId != 2 || resp.Stored != 100 {
		t.Fatalf("second batch, after the rate was raised: %v, %v", resp, err)
	}
	testkit.Eventually(t, 30*time.Second, "the wait counted as throttled", func() bool {
		return testkit.MetricSum(t, reg, "databus_token_throttled_seconds_total", map[string]string{"token": "rl"}) > 0
	})
}
