package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// What the MongoDB stand-in cannot show (it has no transactions, and
// answers every idle getMore at once with an empty batch), shown with
// scripted change streams: batches as a MongoDB server documents them.

// scriptBatch is one getMore's answer: events, or an error.
type scriptBatch struct {
	events []bson.D
	err    error
}

// scriptedStream is a change stream that returns batches given in
// advance. Before each getMore it calls onGetMore with the getMore's
// number, for the test to look at the table between batches; after the
// last batch it fails with errScriptEnd.
type scriptedStream struct {
	t         *testing.T
	batches   []scriptBatch
	onGetMore func(n int)
	n         int
	batch     []bson.Raw
	cur       bson.Raw
	token     bson.Raw
	err       error
}

var errScriptEnd = errors.New("the script has no more batches")

func (s *scriptedStream) TryNext(context.Context) bool {
	if len(s.batch) == 0 {
		if s.onGetMore != nil {
			s.onGetMore(s.n)
		}
		if s.n == len(s.batches) {
			s.err = errScriptEnd
			return false
		}
		b := s.batches[s.n]
		s.n++
		if s.err = b.err; b.err != nil {
			return false
		}
		for _, ev := range b.events {
			raw, err := bson.Marshal(ev)
			if err != nil {
				s.t.Fatal(err)
			}
			s.batch = append(s.batch, raw)
		}
		if len(s.batch) == 0 {
			s.token = bson.Raw(mustMarshal(s.t, bson.D{{Key: "_data", Value: fmt.Sprintf("pbrt%d", s.n)}}))
			return false
		}
	}
	s.cur, s.batch = s.batch[0], s.batch[1:]
	s.token = s.cur.Lookup("_id").Document()
	return true
}

func (s *scriptedStream) Err() error                { return s.err }
func (s *scriptedStream) ID() int64                 { return 1 }
func (s *scriptedStream) ResumeToken() bson.Raw     { return s.token }
func (s *scriptedStream) RemainingBatchLength() int { return len(s.batch) }
func (s *scriptedStream) current() bson.Raw         { return s.cur }

func mustMarshal(t *testing.T, d bson.D) []byte {
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// insertEvent is an insert of document id at cluster time at, in
// transaction txn of session "s1" (0: in none).
func insertEvent(id int32, at uint32, txn int64) bson.D {
	ev := bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: fmt.Sprintf("tok%d", id)}}},
		{Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: at, I: 1}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: id}}},
	}
	if txn != 0 {
		ev = append(ev, bson.E{Key: "lsid", Value: bson.D{{Key: "id", Value: "s1"}}}, bson.E{Key: "txnNumber", Value: txn})
	}
	return ev
}

// scriptedSource is a source of one collection of ints, holding 1.
func scriptedSource(t *testing.T) (*MongoSource, *Table[int32, int32]) {
	t.Helper()
	tb := NewTable[int32, int32]("items")
	s, err := NewMongoSource("mongodb://127.0.0.1:1", "app", []Binding{Bind(tb,
		func(r Row) (int32, error) { return r["_id"].(int32), nil },
		func(r Row) (int32, error) { return r["_id"].(int32), nil })},
		MongoMaxAwait(10*time.Millisecond), MongoPollInterval(time.Millisecond), MongoLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	tb.replace(map[int32]int32{1: 1}, time.Time{})
	return s, tb
}

func keys(tb *Table[int32, int32]) []int32 {
	var ks []int32
	tb.Range(func(k, _ int32) bool { ks = append(ks, k); return true })
	slices.Sort(ks)
	return ks
}

// TestMongoTransactionAcrossBatches: a transaction whose events two
// batches carry becomes visible whole, and one a failed getMore cuts off
// is dropped, with a resume token before it.
func TestMongoTransactionAcrossBatches(t *testing.T) {
	s, tb := scriptedSource(t)
	c := s.colls[0]
	var seen []string
	cs := &scriptedStream{t: t, batches: []scriptBatch{
		{events: []bson.D{insertEvent(2, 101, 0), insertEvent(3, 102, 7), insertEvent(4, 102, 7)}},
		{events: []bson.D{insertEvent(5, 102, 7), insertEvent(6, 103, 0)}},
		{events: []bson.D{insertEvent(7, 104, 8)}},
		{err: errors.New("connection reset")},
	}}
	cs.onGetMore = func(n int) {
		seen = append(seen, fmt.Sprintf("getMore %d: %v token %s", n, keys(tb), c.token.Lookup("_data").StringValue()))
	}
	c.token = mustMarshal(t, bson.D{{Key: "_data", Value: "start"}})
	resync, err := s.stream(context.Background(), c, cs, func(context.Context) (bson.Timestamp, error) { return bson.Timestamp{T: 100}, nil })
	if resync != nil || err == nil {
		t.Fatalf("stream returned %v, %v; want the getMore's error", resync, err)
	}
	want := []string{
		"getMore 0: [1] token start",
		"getMore 1: [1 2] token tok2",         // transaction 7 held back, the token before it
		"getMore 2: [1 2 3 4 5 6] token tok6", // whole
		"getMore 3: [1 2 3 4 5 6] token tok6", // transaction 8 held back
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("between batches:\n%q\nwant\n%q", seen, want)
	}
	if got := keys(tb); fmt.Sprint(got) != "[1 2 3 4 5 6]" {
		t.Errorf("after the failed getMore the table holds %v: transaction 8 was cut off and must not be applied", got)
	}
	if tok := c.token.Lookup("_data").StringValue(); tok != "tok6" {
		t.Errorf("resume token %s: the stream must resume before the cut-off transaction", tok)
	}
}

// TestMongoReadyWhileBusy: a collection written faster than its getMores
// come never gives an empty batch; its table is Ready once an event later
// than where the server was at the stream's start has arrived.
func TestMongoReadyWhileBusy(t *testing.T) {
	s, tb := scriptedSource(t)
	var ready []bool
	cs := &scriptedStream{t: t, batches: []scriptBatch{
		{events: []bson.D{insertEvent(2, 150, 0), insertEvent(3, 160, 0)}},
		{events: []bson.D{insertEvent(4, 200, 0)}}, // at the start point: not past it
		{events: []bson.D{insertEvent(5, 201, 0), insertEvent(6, 202, 0)}},
		{events: []bson.D{insertEvent(7, 203, 0)}},
	}}
	cs.onGetMore = func(int) { ready = append(ready, tb.Ready()) }
	s.stream(context.Background(), s.colls[0], cs, func(context.Context) (bson.Timestamp, error) { return bson.Timestamp{T: 200, I: 1}, nil })
	if want := []bool{false, false, false, true, true}; fmt.Sprint(ready) != fmt.Sprint(want) {
		t.Errorf("Ready between batches %v, want %v", ready, want)
	}
}

// TestMongoStallOnBusyStream: a server silent for longer than the stall
// limit makes the table not Ready; when it answers again, on a stream
// that never gives an empty batch, the table is Ready again once the
// stream is past where the server is then.
func TestMongoStallOnBusyStream(t *testing.T) {
	s, tb := scriptedSource(t)
	var mu sync.Mutex
	var log []string
	readyAt := []bson.Timestamp{{T: 100}, {T: 300}}
	cs := &scriptedStream{t: t, batches: []scriptBatch{
		{events: []bson.D{insertEvent(2, 101, 0)}},
		{events: []bson.D{insertEvent(3, 250, 0)}}, // answered after the stall, before the new point
		{events: []bson.D{insertEvent(4, 301, 0)}},
		{events: []bson.D{insertEvent(5, 302, 0)}},
	}}
	cs.onGetMore = func(n int) {
		mu.Lock()
		log = append(log, fmt.Sprintf("%d:%v", n, tb.Ready()))
		mu.Unlock()
		if n == 1 { // the server goes silent past the limit
			deadline := time.Now().Add(s.cfg.maxAwait + stallAfter + 2*time.Second)
			for tb.Ready() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			log = append(log, fmt.Sprintf("silent:%v", tb.Ready()))
		}
	}
	asked := 0
	s.stream(context.Background(), s.colls[0], cs, func(context.Context) (bson.Timestamp, error) {
		asked++
		return readyAt[min(asked, len(readyAt))-1], nil
	})
	if want := "[0:false 1:true silent:false 2:false 3:true 4:true]"; fmt.Sprint(log) != want {
		t.Errorf("Ready %v, want %s", log, want)
	}
	if asked != 2 {
		t.Errorf("the server's position was read %d times, want 2 (at the start, after the stall)", asked)
	}
}
