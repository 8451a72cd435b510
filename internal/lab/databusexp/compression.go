package databusexp

// The compression table: bytes the gateway writes to Kafka per message,
// and its CPU per message, for each codec, with aggregation off and on,
// on values that compress (text) and values that do not (random). The
// clients are the claims' small-batch ones (1 message per request, each
// awaited): without aggregation a stream's own producer has one record
// per batch to compress; with it, the shared producer's batches hold
// many streams' records. That is report D's "batching and compression
// began to work noticeably better" with aggregation, measured.

import (
	"context"
	"fmt"
	"time"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// compressionRow is one row of the table.
type compressionRow struct {
	codec   string
	payload checker.Payload
	agg     bool
}

// compressionQuickCodecs run in quick mode: the gateway's default
// (franz-go's) and zstd; --full runs every codec, on both payloads.
var compressionQuickCodecs = []string{"snappy", "zstd"}

// compressionRows are the table's rows with o, in the order they run.
func compressionRows(o lab.Options) []compressionRow {
	codecs, payloads := compressionQuickCodecs, []checker.Payload{checker.Text}
	if o.Mode == lab.Full {
		codecs, payloads = databusv1.Compressions, []checker.Payload{checker.Text, checker.Random}
	}
	var out []compressionRow
	for _, p := range payloads {
		for _, c := range codecs {
			for _, agg := range []bool{false, true} {
				out = append(out, compressionRow{codec: c, payload: p, agg: agg})
			}
		}
	}
	return out
}

func compressionKey(r compressionRow) labresult.Key {
	return labresult.Key(fmt.Sprintf("compression/%s/%s/aggregation-%s", r.codec, r.payload, onOff(r.agg)))
}

func payloadText(p checker.Payload) string {
	if p == checker.Random {
		return "random values (incompressible)"
	}
	return "JSON-like text values (compressible)"
}

func compressionLabel(r compressionRow) string {
	return fmt.Sprintf("compression %s, %s: %d small-batch clients, 1 message per request, each awaited, aggregation %s",
		r.codec, payloadText(r.payload), smallClients, onOff(r.agg))
}

// compressionRun is each row's run: long enough for a stable figure of
// bytes per message, which every message gives.
const compressionRun = 5 * time.Second

func compressionEstimate(o lab.Options) time.Duration {
	run, _ := o.MinRun()
	return time.Duration(len(compressionRows(o))*o.Repeats()) * (max(compressionRun, run) + 1500*time.Millisecond)
}

// compression measures the table on the shared gateway, which allows
// every codec: each row's streams ask for theirs in metadata. Nothing
// consumes: the rows measure what reaches Kafka, and the publish rows
// verify delivery.
func (b *bench) compression(ctx context.Context) error {
	for _, r := range compressionRows(b.run.Opts) {
		cfg := smallBatch(r.agg, reportInflight)
		cfg.Groups, cfg.Members, cfg.Consume, cfg.SubBatch = 0, 0, "", 0
		cfg.Payload, cfg.Compression = r.payload, r.codec
		m := b.publish(compressionKey(r), cfg)
		m.Duration, m.NoWarmup = compressionRun, true // each checker run warms up its streams itself
		d := m.Driver.(Checker)
		d.KafkaBytes = true
		m.Driver = d
		row, err := b.run.Measure(ctx, m)
		if err != nil {
			return err
		}
		compressionNote(row)
		b.run.AddRow(row)
	}
	return nil
}

// compressionNote says what the row's bytes mean.
func compressionNote(row *labresult.Row) {
	if f := row.Get(kafkaBytesPerMsg); f != nil {
		row.AddNote("%.1f bytes per message to Kafka (%.1f before compression, ratio %.3f); the gateway spent %.1f µs of CPU per message",
			*f, row.Value(kafkaRawBytesPerMsg), row.Value(compressionRatio), row.Value(gatewayCPUPerMsg))
	}
}

// compressionRatios are shown beside the table, per codec on the text
// values: bytes to Kafka per message with aggregation on over off.
func compressionRatios(o lab.Options) []labresult.Target {
	var out []labresult.Target
	for _, r := range compressionRows(o) {
		if r.agg || r.payload != checker.Text {
			continue
		}
		on := r
		on.agg = true
		out = append(out, labresult.Target{
			Key:   labresult.Key("compression-aggregation-" + r.codec),
			Text:  fmt.Sprintf("%s, %s, %d small-batch clients: bytes to Kafka per message with aggregation on over off (report D: with aggregation \"batching and compression began to work noticeably better\"; no figure given)", r.codec, payloadText(r.payload), smallClients),
			Ratio: &labresult.Ratio{Num: compressionKey(on), Den: compressionKey(r), Metric: kafkaBytesPerMsg.Name},
		})
	}
	return out
}

// kafkaBytesSeries is the gateway's count of record bytes written to
// Kafka, over every codec (a run uses one).
const kafkaBytesSeries = "databus_kafka_produce_bytes_total"

// settledKafkaBytes reads the gateway's record bytes written to Kafka so
// far, compressed and uncompressed, once two reads 50 ms apart agree
// (franz-go counts a batch from a goroutine of its own, just after its
// records are acked), or after a second; ok false when unknown.
func settledKafkaBytes(ctx context.Context, metrics string) (bytes [2]float64, ok bool) {
	read := func() ([2]float64, bool) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := lab.ScrapeMetrics(ctx, metrics)
		if err != nil || !m.Has(kafkaBytesSeries) {
			return [2]float64{}, false
		}
		return [2]float64{m.Sum(kafkaBytesSeries, map[string]string{"form": "compressed"}), m.Sum(kafkaBytesSeries, map[string]string{"form": "uncompressed"})}, true
	}
	bytes, ok = read()
	for deadline := time.Now().Add(time.Second); ok && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return bytes, false
		case <-time.After(50 * time.Millisecond):
		}
		next, nextOK := read()
		if !nextOK || next == bytes {
			return bytes, nextOK
		}
		bytes = next
	}
	return bytes, ok
}

// kafkaBytesFigures sets s's bytes per message from the gateway's counts
// before and after a run that acked acked messages (its warm-up and its
// streams' first messages included: the counts cover them too).
func kafkaBytesFigures(s *lab.Sample, before, after [2]float64, acked int64) {
	if acked <= 0 || after[1] <= before[1] {
		return
	}
	c, u := after[0]-before[0], after[1]-before[1]
	s.Figures[kafkaBytesPerMsg.Name] = c / float64(acked)
	s.Figures[kafkaRawBytesPerMsg.Name] = u / float64(acked)
	s.Figures[compressionRatio.Name] = c / u
}
