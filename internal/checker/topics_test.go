package checker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
)

// TestTopicsSpreadStreams: over several topics, stream i writes to topic
// i mod n (counted from what Kafka holds in each), every group reads
// every topic, and the checker's count is exact: what each topic holds
// is what the checker says was acked on it, and every group received
// each acked message (at least once).
func TestTopicsSpreadStreams(t *testing.T) {
	forEachKafka(t, func(t *testing.T, k *deps.Kafka) {
		addr := startGateway(t, gateway.Config{Brokers: k.Brokers, CommitInterval: 100 * time.Millisecond})
		prefix := fmt.Sprintf("checker-topics-%d", time.Now().UnixNano())
		cfg := checker.Config{
			Target: addr, Brokers: k.Brokers, Topic: prefix, TopicCount: 3, Partitions: 2,
			Scenario: checker.Throughput, Streams: 5, Batch: 20, Inflight: 4, Groups: 2, Members: 2,
			Warmup: 200 * time.Millisecond, Duration: 700 * time.Millisecond, DrainTimeout: 30 * time.Second,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := checker.Run(ctx, cfg, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		text := summary(t, res)
		if res.Failed != 0 || len(res.Errors) > 0 {
			t.Fatalf("%d failed, errors %v: the counts below assume none", res.Failed, res.Errors)
		}
		held := recordsIn(t, ctx, k, prefix+"-0", prefix+"-1", prefix+"-2")
		if len(res.Topics) != 3 {
			t.Fatalf("result lists topics %+v, want 3", res.Topics)
		}
		var sum int64
		for i, f := range res.Topics {
			wantStreams := []int{2, 2, 1}[i] // streams 0,3 | 1,4 | 2
			if f.Topic != fmt.Sprintf("%s-%d", prefix, i) || f.Streams != wantStreams {
				t.Errorf("topic %d: %+v, want %s-%d with %d streams", i, f, prefix, i, wantStreams)
			}
			if f.Acked == 0 || held[f.Topic] != f.Acked {
				t.Errorf("topic %s holds %d records, the checker counted %d acked on it", f.Topic, held[f.Topic], f.Acked)
			}
			if !strings.Contains(text, fmt.Sprintf("%s (%d stream(s), %d acked)", f.Topic, f.Streams, f.Acked)) {
				t.Errorf("the summary does not list %s", f.Topic)
			}
			sum += f.Acked
		}
		d := res.Delivery
		switch {
		case sum != res.Acked || d.Acked != res.Acked:
			t.Fatalf("topics' acked sum to %d, the publishers counted %d, the ledger %d", sum, res.Acked, d.Acked)
		case d.Lost != 0 || !res.OK():
			t.Fatalf("%d lost (first: %v)", d.Lost, d.Sample)
		}
		for _, g := range d.PerGroup {
			if g.Received != d.Acked {
				t.Errorf("group %s received %d distinct messages, want exactly the %d acked", g.Group, g.Received, d.Acked)
			}
		}
	})
}

// recordsIn counts the records each topic holds, from Kafka's offsets.
func recordsIn(t *testing.T, ctx context.Context, k *deps.Kafka, topics ...string) map[string]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		s, _ := starts.Lookup(o.Topic, o.Partition)
		out[o.Topic] += o.Offset - s.Offset
	})
	return out
}

// TestRunSettingsRefused: topic lists, payloads and codecs that cannot work
// are refused before anything runs, with what to give instead.
func TestRunSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  checker.Config
		want string
	}{
		{checker.Config{Topics: []string{"a", "b", "a"}}, "names a topic twice"},
		{checker.Config{Topics: []string{"a", "b"}, TopicCount: 2}, "not both"},
		{checker.Config{TopicCount: 20, Streams: 10}, "give at least --streams 20"},
		{checker.Config{TopicCount: checker.MaxTopics + 1, Streams: 2000}, "give 1 to 1000"},
		{checker.Config{Topics: []string{"a", "b"}, Consume: checker.Only, Groups: 1, Brokers: []string{"127.0.0.1:1"}}, "drains one topic"},
		{checker.Config{Compression: "brotli"}, "compression \"brotli\": use one of none, gzip, snappy, lz4, zstd"},
		{checker.Config{Payload: "pictures"}, "use zeros, text or random"},
		{checker.Config{Direct: true, Brokers: []string{"127.0.0.1:1"}, Compression: "zstd"}, "drop --compression"},
	} {
		c.cfg.Target = "127.0.0.1:1"
		_, err := checker.Run(context.Background(), c.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}
