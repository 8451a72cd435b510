package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// testRecords are n records of partition 3 with 0, 1 or 2 headers each.
func testRecords(n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &kgo.Record{Topic: "orders", Partition: 3, Offset: int64(100 + i), Timestamp: time.UnixMilli(int64(1700000000000 + i)),
			Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("value ", i))}
		for j := range i % 3 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprint("h", j), Value: []byte(fmt.Sprint(i, j))})
		}
		recs[i] = r
	}
	return recs
}

// TestConsumedMessages checks that a response's messages say what their
// records say, field by field, headers in order, each message with its
// own headers only (they share one array).
func TestConsumedMessages(t *testing.T) {
	recs := testRecords(7)
	got := consumedMessages(recs)
	if len(got) != len(recs) {
		t.Fatalf("%d messages for %d records", len(got), len(recs))
	}
	for i, r := range recs {
		want := &databusv1.ConsumedMessage{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			TimestampMs: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			want.Headers = append(want.Headers, &databusv1.Header{Key: h.Key, Value: h.Value})
		}
		if !proto.Equal(got[i], want) {
			t.Errorf("message %d: %v, want %v", i, got[i], want)
		}
		if cap(got[i].Headers) != len(r.Headers) {
			t.Errorf("message %d: headers' capacity %d, want %d: an append would write over the next message's", i, cap(got[i].Headers), len(r.Headers))
		}
	}
}

// TestConsumedMessagesAllocations holds the conversion to a few
// allocations per response whatever its size: per message, they were
// most of what a drain allocated.
func TestConsumedMessagesAllocations(t *testing.T) {
	recs := testRecords(100)
	if n := testing.AllocsPerRun(20, func() { consumedMessages(recs) }); n > 4 {
		t.Errorf("%.0f allocations to convert %d records, want at most 4", n, len(recs))
	}
}

func BenchmarkConsumedMessages(b *testing.B) {
	recs := testRecords(100)
	b.ReportAllocs()
	for b.Loop() {
		consumedMessages(recs)
	}
}
