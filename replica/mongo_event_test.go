package replica

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestMongoEvents feeds change events, as MongoDB documents them, to the
// source's event handling one by one: what each does to the table, which
// ones end the stream, and which are skipped. Some of these (invalidate
// alone, a drop with its ns, wallTime) the stand-in never sends.
func TestMongoEvents(t *testing.T) {
	type doc struct {
		ID   int32
		Name string
	}
	ts := bson.Timestamp{T: 1_700_000_000, I: 7}
	d := func(kv ...any) bson.D {
		var out bson.D
		for i := 0; i < len(kv); i += 2 {
			out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return out
	}
	ns := d("db", "app", "coll", "items")
	for _, tc := range []struct {
		name     string
		ev       bson.D
		want     map[int32]string // table after the event (starting from {1: "one"})
		ends     bool
		decodeKO int64
	}{
		{"insert", d("operationType", "insert", "clusterTime", ts, "ns", ns, "documentKey", d("_id", int32(2)), "fullDocument", d("_id", int32(2), "name", "two")),
			map[int32]string{1: "one", 2: "two"}, false, 0},
		{"update with looked-up document", d("operationType", "update", "clusterTime", ts, "ns", ns, "documentKey", d("_id", int32(1)), "fullDocument", d("_id", int32(1), "name", "uno")),
			map[int32]string{1: "uno"}, false, 0},
		{"update keyed by fullDocument, not documentKey", d("operationType", "update", "clusterTime", ts, "documentKey", d("$set", d("name", "x")), "fullDocument", d("_id", int32(1), "name", "x")),
			map[int32]string{1: "x"}, false, 0},
		{"update of a document deleted since: skipped", d("operationType", "update", "clusterTime", ts, "ns", ns, "documentKey", d("_id", int32(1)), "fullDocument", nil),
			map[int32]string{1: "one"}, false, 0},
		{"update whose fullDocument is no document: skipped", d("operationType", "update", "clusterTime", ts, "documentKey", d("_id", int32(1)), "fullDocument", d("name", "delta only")),
			map[int32]string{1: "one"}, false, 0},
		{"replace", d("operationType", "replace", "clusterTime", ts, "ns", ns, "documentKey", d("_id", int32(1)), "fullDocument", d("_id", int32(1), "name", "new")),
			map[int32]string{1: "new"}, false, 0},
		{"delete", d("operationType", "delete", "clusterTime", ts, "ns", ns, "documentKey", d("_id", int32(1))),
			map[int32]string{}, false, 0},
		{"insert that does not decode", d("operationType", "insert", "clusterTime", ts, "documentKey", d("_id", int32(3)), "fullDocument", d("_id", int32(3), "name", int32(5))),
			map[int32]string{1: "one"}, false, 1},
		{"insert without a document", d("operationType", "insert", "clusterTime", ts, "documentKey", d("_id", int32(3))),
			map[int32]string{1: "one"}, false, 1},
		{"delete with a bad key", d("operationType", "delete", "clusterTime", ts, "documentKey", d("_id", "three")),
			map[int32]string{1: "one"}, false, 1},
		{"invalidate", d("operationType", "invalidate", "clusterTime", ts),
			map[int32]string{1: "one"}, true, 0},
		{"drop of this collection", d("operationType", "drop", "clusterTime", ts, "ns", ns),
			map[int32]string{1: "one"}, true, 0},
		{"drop that does not say of what", d("operationType", "drop", "clusterTime", ts),
			map[int32]string{1: "one"}, true, 0},
		{"drop of another database's collection", d("operationType", "drop", "clusterTime", ts, "ns", d("db", "other", "coll", "items")),
			map[int32]string{1: "one"}, false, 0},
		{"rename of another collection onto this one", d("operationType", "rename", "clusterTime", ts, "ns", d("db", "app", "coll", "tmp"), "to", d("db", "app", "coll", "items")),
			map[int32]string{1: "one"}, true, 0},
		{"dropDatabase", d("operationType", "dropDatabase", "clusterTime", ts, "ns", d("db", "app")),
			map[int32]string{1: "one"}, true, 0},
		{"createIndexes (expanded events)", d("operationType", "createIndexes", "clusterTime", ts, "ns", ns),
			map[int32]string{1: "one"}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewTable[int32, doc]("items")
			b := Bind(tb,
				func(r Row) (int32, error) {
					id, ok := r["_id"].(int32)
					if !ok {
						return 0, fmt.Errorf("_id is %T", r["_id"])
					}
					return id, nil
				},
				func(r Row) (doc, error) {
					name, ok := r["name"].(string)
					if !ok {
						return doc{}, fmt.Errorf("name is %T", r["name"])
					}
					return doc{ID: r["_id"].(int32), Name: name}, nil
				})
			s, err := NewMongoSource("mongodb://127.0.0.1:1", "app", []Binding{b}, MongoLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			c := s.colls[0]
			tb.replace(map[int32]doc{1: {1, "one"}}, time.Time{})
			raw, err := bson.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			var touched bool
			end, commit := s.event(c, raw, &touched)
			if touched {
				c.b.flush(commit)
			}
			if (end != nil) != tc.ends {
				t.Fatalf("ends the stream: %v, want %v", end, tc.ends)
			}
			if tc.ends && c.ended != ts {
				t.Errorf("the ending event's time %v was not kept for the next stream's start", c.ended)
			}
			if !commit.Equal(time.Unix(int64(ts.T), 0)) {
				t.Errorf("commit time %v, want the event's clusterTime", commit)
			}
			got := map[int32]string{}
			tb.Range(func(k int32, v doc) bool { got[k] = v.Name; return true })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("table %v, want %v", got, tc.want)
			}
			if s.DecodeErrors() != tc.decodeKO {
				t.Errorf("DecodeErrors %d, want %d", s.DecodeErrors(), tc.decodeKO)
			}
		})
	}
}

func TestMongoEventWallTime(t *testing.T) {
	s, err := NewMongoSource("mongodb://127.0.0.1:1", "app", []Binding{Bind(NewTable[int32, int]("items"),
		func(Row) (int32, error) { return 1, nil }, func(Row) (int, error) { return 1, nil })})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := bson.Marshal(bson.D{{Key: "operationType", Value: "createIndexes"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 1}}, {Key: "wallTime", Value: bson.DateTime(1_700_000_000_123)}})
	var touched bool
	if _, commit := s.event(s.colls[0], raw, &touched); !commit.Equal(time.UnixMilli(1_700_000_000_123)) {
		t.Fatalf("commit %v: wallTime (ms) must win over clusterTime (s)", commit)
	}
}

func TestHistoryLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{mongo.CommandError{Code: 286, Name: "ChangeStreamHistoryLost"}, true},
		{fmt.Errorf("open change stream: %w", mongo.CommandError{Code: 280, Name: "ChangeStreamFatalError"}), true},
		{mongo.CommandError{Code: 260, Name: "InvalidResumeToken"}, true},
		{mongo.CommandError{Code: 136, Name: "CappedPositionLost"}, true},
		{mongo.CommandError{Code: 43, Name: "CursorNotFound"}, false},
		{mongo.CommandError{Code: 40573, Message: "The $changeStream stage is only supported on replica sets"}, false},
		{errors.New("connection reset"), false},
	} {
		if got := historyLost(tc.err); got != tc.want {
			t.Errorf("historyLost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
