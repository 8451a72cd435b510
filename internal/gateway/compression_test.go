package gateway_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// Kafka's record batch attribute codes (the low three bits), as franz-go's
// FetchBatchMetrics.CompressionType reports them.
var codecCodes = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// TestCompressionPerStream: the codec a stream asks for (or the gateway's
// default) is the codec of its batches as a consumer reads them from
// Kafka, with and without aggregation, and the bytes metric counts each
// codec's batches before and after compression.
func TestCompressionPerStream(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		reg := prometheus.NewRegistry()
		w := startGateway(t, gateway.Config{Brokers: k.Brokers, Compression: "lz4", CompressionAllowed: []string{"none", "gzip", "zstd"}, Registry: reg})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// Compressible values: every codec shrinks them, so franz-go does
		// not fall back to sending them uncompressed.
		value := bytes.Repeat([]byte("databus compresses this "), 40)
		batch := make([]databus.Message, 20)
		for i := range batch {
			batch[i] = databus.Message{Value: value}
		}
		cases := []struct {
			ask, want   string
			aggregation bool
		}{
			{"", "lz4", false},
			{"zstd", "zstd", false},
			{"none", "none", false},
			{"", "lz4", true},
			{"gzip", "gzip", true},
			{"zstd", "zstd", true},
		}
		topics := make([]string, len(cases))
		for i, c := range cases {
			topics[i] = newTopic(t, k, 1)
			var opts []databus.PublisherOption
			if c.ask != "" {
				opts = append(opts, databus.Compression(c.ask))
			}
			opts = append(opts, databus.Aggregation(c.aggregation))
			pub, err := w.client(t).NewPublisher(ctx, topics[i], opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := pub.Publish(ctx, batch...); err != nil {
				t.Fatalf("publish asking %q (aggregation %v): %v", c.ask, c.aggregation, err)
			}
			pub.Close()
		}

		seen := map[string]map[uint8]int{} // topic -> codec -> batches
		var mu sync.Mutex
		cl := depstest.Client(t, k, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.WithHooks(fetchBatchHook(func(topic string, m kgo.FetchBatchMetrics) {
				mu.Lock()
				defer mu.Unlock()
				if seen[topic] == nil {
					seen[topic] = map[uint8]int{}
				}
				seen[topic][m.CompressionType] += m.NumRecords
			})))
		for got := 0; got < len(cases)*len(batch); {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("consume: %v (%d of %d records)", err, got, len(cases)*len(batch))
			}
			got += fs.NumRecords()
		}
		mu.Lock()
		defer mu.Unlock()
		for i, c := range cases {
			want := map[uint8]int{codecCodes[c.want]: len(batch)}
			if got := seen[topics[i]]; len(got) != 1 || got[codecCodes[c.want]] != len(batch) {
				t.Errorf("asking %q (aggregation %v): records by batch codec in Kafka %v, want %v (%s)", c.ask, c.aggregation, got, want, c.want)
			}
		}
		streams := map[string]int{}
		for _, c := range cases {
			streams[c.want]++
		}
		// franz-go counts a batch from a goroutine of its own once Kafka
		// stored it: by now, or shortly after.
		bytesOf := func(codec, form string) float64 {
			return testkit.MetricSum(t, reg, "databus_kafka_produce_bytes_total", map[string]string{"codec": codec, "form": form})
		}
		for _, codec := range []string{"lz4", "zstd", "gzip"} {
			least := streams[codec] * len(batch) * len(value)
			testkit.EventuallyNil(t, 5*time.Second, codec+"'s bytes counted", func() error {
				if raw, packed := bytesOf(codec, "uncompressed"), bytesOf(codec, "compressed"); raw < float64(least) || packed <= 0 || packed >= raw/4 {
					return fmt.Errorf("databus_kafka_produce_bytes_total{codec=%q}: uncompressed %v, compressed %v: want at least %d uncompressed, shrunk 4 times or more", codec, raw, packed, least)
				}
				return nil
			})
		}
		testkit.EventuallyNil(t, 5*time.Second, "none's bytes counted", func() error {
			if raw, packed := bytesOf("none", "uncompressed"), bytesOf("none", "compressed"); raw < float64(len(batch)*len(value)) || raw != packed {
				return fmt.Errorf("databus_kafka_produce_bytes_total{codec=none}: uncompressed %v, compressed %v: want equal, at least %d", raw, packed, len(batch)*len(value))
			}
			return nil
		})
		// The default codec's shared producer and one per other codec in
		// aggregated use (gzip, zstd), and the per-stream producers gone.
		if got := testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "shared"}); got != 3 {
			t.Errorf("databus_kafka_clients{kind=shared} = %v, want 3 (lz4, gzip, zstd)", got)
		}
	})
}

type fetchBatchHook func(topic string, m kgo.FetchBatchMetrics)

func (h fetchBatchHook) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	h(topic, m)
}

// TestCompressionRefused: a codec the gateway does not allow, or no codec
// at all, is refused with InvalidArgument naming what is allowed; the
// default codec is allowed whatever the list says.
func TestCompressionRefused(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, Compression: "lz4", CompressionAllowed: []string{"none", "zstd"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := rawConn(t, w.addr)
	for _, c := range []struct{ ask, want string }{
		{"snappy", `metadata "x-databus-compression" is "snappy", which this gateway does not allow (--compression-allowed): use one of none, lz4, zstd, or leave it out for the default (lz4)`},
		{"brotli", `metadata "x-databus-compression" is "brotli", not a codec: use one of none, gzip, snappy, lz4, zstd, or leave it out for this gateway's default (lz4)`},
	} {
		for _, agg := range []string{"off", "on"} {
			_, err := openPublishStream(ctx, api, gateway.MDTopic, topic, gateway.MDCompression, c.ask, gateway.MDAggregation, agg)
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || st.Message() != "databus: "+c.want {
				t.Fatalf("asking %q, aggregation %s: got %v, want InvalidArgument %q", c.ask, agg, err, c.want)
			}
		}
	}
	// Through the Go client, the first publish returns the refusal.
	pub, err := w.client(t).NewPublisher(ctx, topic, databus.Compression("gzip"))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(ctx, databus.Message{Value: []byte("x")}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--compression-allowed") {
		t.Fatalf("publish asking gzip: %v, want InvalidArgument naming --compression-allowed", err)
	}
	for _, ask := range []string{"lz4", "LZ4", "zstd", "none"} {
		if _, err := openPublishStream(ctx, api, gateway.MDTopic, topic, gateway.MDCompression, ask); err != nil {
			t.Fatalf("asking %q: %v", ask, err)
		}
	}
	// A bad operator setting stops the gateway at start.
	for _, cfg := range []gateway.Config{
		{Brokers: k.Brokers, Compression: "brotli"},
		{Brokers: k.Brokers, CompressionAllowed: []string{"zstd", "lzma"}},
	} {
		if _, err := gateway.New(cfg); err == nil || !strings.Contains(err.Error(), "none, gzip, snappy, lz4, zstd") {
			t.Errorf("New(%+v) = %v, want an error listing the codecs", cfg.CompressionAllowed, err)
		}
	}
}

// TestCompressionSharedProducersCounted: an aggregated stream whose codec
// has no shared producer yet needs a Kafka client, so it is refused at
// --max-kafka-clients; one whose codec has one is not.
func TestCompressionSharedProducersCounted(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k, 1)
	reg := prometheus.NewRegistry()
	w := startGateway(t, gateway.Config{Brokers: k.Brokers, MaxKafkaClients: 2, Registry: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := rawConn(t, w.addr)
	for _, ask := range []string{"snappy", "zstd", "zstd", ""} {
		if _, err := openPublishStream(ctx, api, gateway.MDTopic, topic, gateway.MDCompression, ask, gateway.MDAggregation, "on"); err != nil {
			t.Fatalf("aggregated, asking %q: %v", ask, err)
		}
	}
	_, err := openPublishStream(ctx, api, gateway.MDTopic, topic, gateway.MDCompression, "gzip", gateway.MDAggregation, "on")
	refusal(t, err, "--max-kafka-clients")
	if got := testkit.MetricSum(t, reg, "databus_kafka_clients", map[string]string{"kind": "shared"}); got != 2 {
		t.Fatalf("databus_kafka_clients{kind=shared} = %v, want 2 (snappy, zstd)", got)
	}
}

// TestCompressionFlags: --compression and --compression-allowed parse,
// go back into a command line (how the lab starts a gateway from a
// Config), and franz-go's default takes no argument.
func TestCompressionFlags(t *testing.T) {
	fs := flag.NewFlagSet("databus", flag.ContinueOnError)
	var o gateway.Options
	o.RegisterFlags(fs)
	if err := fs.Parse([]string{"--brokers", "127.0.0.1:1", "--compression", "zstd", "--compression-allowed", "none,lz4"}); err != nil {
		t.Fatal(err)
	}
	if o.Compression != "zstd" || !slices.Equal(o.CompressionAllowed, []string{"none", "lz4"}) {
		t.Fatalf("Compression %q, allowed %q", o.Compression, o.CompressionAllowed)
	}
	if args := o.Args(); !slices.Contains(args, "--compression=zstd") || !slices.Contains(args, "--compression-allowed=none,lz4") {
		t.Errorf("Args %q lack the codecs", args)
	}
	if args := (gateway.Options{Config: gateway.Config{Compression: gateway.DefaultCompression}}).Args(); len(args) != 0 {
		t.Errorf("the default codec gives arguments %q, want none", args)
	}
}
