package databus_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// gw is an in-process gateway on 127.0.0.1:0.
type gw struct {
	addr string
	g    *gateway.Gateway
	srv  *grpc.Server
	stop context.CancelFunc
}

func startGateway(t *testing.T, cfg gateway.Config) *gw {
	t.Helper()
	return startGatewayWith(t, cfg, gateway.ServerOptions{})
}

// startGatewayWith is startGateway with server options.
func startGatewayWith(t *testing.T, cfg gateway.Config, so gateway.ServerOptions) *gw {
	t.Helper()
	return serveGateway(t, testkit.Listen(t), cfg, so)
}

// serveGateway is startGateway on ln, with server options.
func serveGateway(t *testing.T, ln net.Listener, cfg gateway.Config, so gateway.ServerOptions) *gw {
	t.Helper()
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &gw{addr: ln.Addr().String(), g: g, srv: gateway.NewServer(ctx, g, so), stop: cancel}
	go w.srv.Serve(ln)
	t.Cleanup(w.kill)
	return w
}

// kill stops the gateway without a drain: its streams end at once, as a
// crashed gateway's would (the Kafka side still leaves its groups).
func (w *gw) kill() {
	w.srv.Stop()
	w.g.Close()
	w.stop()
}

func dial(t *testing.T, addr string) *databus.Client {
	t.Helper()
	c, err := databus.Dial(addr, databus.WithBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// publisher opens a publisher to topic through a client of its own,
// closed when the test ends.
func publisher(ctx context.Context, t *testing.T, addr, topic string, opts ...databus.PublisherOption) *databus.Publisher {
	t.Helper()
	pub, err := dial(t, addr).NewPublisher(ctx, topic, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return pub
}

func msgs(from, n int) []databus.Message {
	out := make([]databus.Message, n)
	for i := range out {
		out[i] = databus.Message{Key: []byte(strconv.Itoa(from + i)), Value: []byte("v")}
	}
	return out
}

// storedKeys reads topic from the start, straight from Kafka, until it
// has every key of want (or the deadline passes) and a poll finds nothing
// more; it returns how many times it read each key.
func storedKeys(t *testing.T, k *deps.Kafka, topic string, want map[string]bool) map[string]int {
	t.Helper()
	stored := map[string]int{}
	readTopic(t, k, topic, "every message answered as published is in Kafka", func(recs []*kgo.Record) error {
		clear(stored)
		for _, r := range recs {
			stored[string(r.Key)]++
		}
		for key := range want {
			if stored[key] == 0 {
				return fmt.Errorf("message %s missing (%d of %d stored)", key, len(stored), len(want))
			}
		}
		return nil
	})
	return stored
}

// readTopic reads topic from the start, straight from Kafka, until what
// it read satisfies have (nil) and a poll finds nothing more, or the
// deadline passes; it returns every record read.
func readTopic(t *testing.T, k *deps.Kafka, topic, what string, have func([]*kgo.Record) error) []*kgo.Record {
	t.Helper()
	cl := depstest.Client(t, k, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	testkit.EventuallyNil(t, 30*time.Second, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r); n++ })
		if err := have(recs); err != nil {
			return err
		}
		if n > 0 {
			return errors.New("still reading") // duplicates may follow
		}
		return nil
	})
	return recs
}

// isCtxErr reports whether err is a context's: the call waited out its
// deadline instead of being answered.
func isCtxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
