package replica_test

// These tests run MongoSource against the MongoDB stand-in
// (mongo-java-server, see internal/deps/mongo.go): a real mongod cannot
// be installed here. Faults the stand-in cannot make (a lost connection
// is made by cutting it; lost history by answering a resume as a real
// server would) come from wireProxy.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// startStandIn starts a MongoDB stand-in for t alone, or skips t when it
// cannot run here.
func startStandIn(t *testing.T) *deps.Mongo { return depstest.NewMongo(t) }

// mongoItems returns a new collection (in a database of its own) holding
// items 1..n, and a client for the test's writes.
func mongoItems(t *testing.T, m *deps.Mongo, n int) (db string, coll *mongo.Collection) {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(m.URI))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	db = fmt.Sprintf("t%d", rand.Int64())
	coll = client.Database(db).Collection("items")
	docs := make([]any, 0, n)
	for i := 1; i <= n; i++ {
		docs = append(docs, itemDoc(int32(i), fmt.Sprint("item ", i), int32(i)))
	}
	if n > 0 {
		if _, err := coll.InsertMany(context.Background(), docs); err != nil {
			t.Fatal(err)
		}
	}
	return db, coll
}

func itemDoc(id int32, name string, qty int32) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "name", Value: name}, {Key: "qty", Value: qty}}
}

func bindMongoItems(t *replica.Table[int32, item]) replica.Binding {
	return replica.Bind(t,
		func(r replica.Row) (int32, error) { return itemKeyOf(r, "_id") },
		func(r replica.Row) (item, error) { return decodeItemOf(r, "_id", "document") })
}

// startMongoSource runs a source for db.items at uri and waits until the
// table is ready.
func startMongoSource(t *testing.T, uri, db string, opts ...replica.MongoOption) (*replica.Table[int32, item], *replica.MongoSource) {
	t.Helper()
	tb := replica.NewTable[int32, item]("items")
	opts = append([]replica.MongoOption{replica.MongoBackoff(20*time.Millisecond, 200*time.Millisecond),
		replica.MongoMaxAwait(200 * time.Millisecond), replica.MongoPollInterval(5 * time.Millisecond)}, opts...)
	src, err := replica.NewMongoSource(uri, db, []replica.Binding{bindMongoItems(tb)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := tb.WaitReady(wctx); err != nil {
		t.Fatalf("replica not ready: %v", err)
	}
	return tb, src
}

// newIDs hands out ids that no document has had, for inserts.
var newIDs atomic.Int32

func init() { newIDs.Store(1 << 20) }

// mongoWriter changes random items until ctx ends: inserts, upserts,
// $set and $inc updates, replaces and deletes.
//
// Inserts use new ids only: the stand-in logs an insert that fails on a
// duplicate key as if it had succeeded (MongoDB does not), and a change
// stream would carry that phantom.
func mongoWriter(ctx context.Context, coll *mongo.Collection, seed uint64, maxID int) error {
	r := rand.New(rand.NewPCG(seed, 11))
	for ctx.Err() == nil {
		id := int32(1 + r.IntN(maxID))
		filter := bson.D{{Key: "_id", Value: id}}
		var err error
		switch r.IntN(6) {
		case 0:
			id := newIDs.Add(1)
			_, err = coll.InsertOne(ctx, itemDoc(id, fmt.Sprint("new ", id), int32(r.IntN(1000))))
		case 1:
			_, err = coll.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: fmt.Sprint("up ", id)}, {Key: "qty", Value: int32(r.IntN(1000))}}}},
				options.UpdateOne().SetUpsert(true))
		case 2:
			_, err = coll.UpdateOne(ctx, filter, bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: int32(1)}}}})
		case 3:
			_, err = coll.ReplaceOne(ctx, filter, itemDoc(id, fmt.Sprint("replaced ", id), int32(r.IntN(1000))))
		case 4, 5:
			_, err = coll.DeleteOne(ctx, filter)
		}
		// The driver fails an operation early when the deadline is nearer
		// than a round trip: the end of the run, not an error.
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

// mongoConverged waits until the replica equals the collection.
func mongoConverged(t *testing.T, coll *mongo.Collection, tb *replica.Table[int32, item]) {
	t.Helper()
	convergedTo(t, tb, "the collection", func() (map[int32]item, error) { return readItems(coll) })
}

func readItems(coll *mongo.Collection) (map[int32]item, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	want := map[int32]item{}
	for cur.Next(ctx) {
		var it struct {
			ID   int32 `bson:"_id"`
			Name string
			Qty  int32
		}
		if err := cur.Decode(&it); err != nil {
			return nil, err
		}
		want[it.ID] = item{ID: it.ID, Name: it.Name, Qty: it.Qty}
	}
	return want, cur.Err()
}

// writeSome runs n writers for d, then fails t on a write error.
func writeSome(t *testing.T, coll *mongo.Collection, n int, d time.Duration, maxID int) {
	t.Helper()
	stop := runWriters(t, n, func(ctx context.Context, i int) error { return mongoWriter(ctx, coll, rand.Uint64()+uint64(i), maxID) })
	time.Sleep(d)
	stop()
}

// TestMongoSnapshotStreamBoundary starts the replica while writers run:
// changes around the snapshot (between the operation time and the end
// of the find) must neither be lost nor leave a replay's older state.
func TestMongoSnapshotStreamBoundary(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 2000)
	stop := runWriters(t, 4, func(ctx context.Context, i int) error { return mongoWriter(ctx, coll, uint64(i), 3000) })
	time.Sleep(200 * time.Millisecond)
	tb, src := startMongoSource(t, m.URI, db)
	time.Sleep(700 * time.Millisecond)
	stop()
	mongoConverged(t, coll, tb)
	if src.DecodeErrors() != 0 || src.Resyncs() != 0 {
		t.Errorf("DecodeErrors %d, Resyncs %d: want none", src.DecodeErrors(), src.Resyncs())
	}
	t.Logf("%d rows, %d changes applied", tb.Len(), tb.Stats().Applied)
}

// TestMongoResumeAfterConnectionLoss cuts the source off the server (every
// connection, and new ones refused) while writers run, then lets it back:
// it must resume from its token, not reload, and converge.
func TestMongoResumeAfterConnectionLoss(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 500)
	proxy := newWireProxy(t, m.Addr)
	tb, src := startMongoSource(t, proxy.URI(), db)
	writeSome(t, coll, 2, 200*time.Millisecond, 800)
	mongoConverged(t, coll, tb) // a resume token is recorded

	proxy.setDown(true)
	stop := runWriters(t, 1, func(ctx context.Context, _ int) error { return mongoWriter(ctx, coll, 3, 800) })
	waitUnready(t, tb)
	time.Sleep(300 * time.Millisecond)
	proxy.setDown(false)
	time.Sleep(300 * time.Millisecond)
	stop()
	mongoConverged(t, coll, tb)
	waitReady(t, tb)
	if src.Resyncs() != 0 {
		t.Errorf("%d resyncs: a lost connection should resume from the token", src.Resyncs())
	}
}

// TestMongoHistoryLostResyncs: the resume point is gone from the oplog
// (ChangeStreamHistoryLost), so the source must reload the collection
// and swap it in. The stand-in never loses history; the proxy answers
// the resume the way a real server does.
func TestMongoHistoryLostResyncs(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 500)
	proxy := newWireProxy(t, m.Addr)
	tb, src := startMongoSource(t, proxy.URI(), db)
	writeSome(t, coll, 2, 200*time.Millisecond, 800)
	mongoConverged(t, coll, tb)

	proxy.setDown(true)
	proxy.failNextResumes(1)
	// Changes the resumed stream would have carried: only a reload brings them.
	if _, err := coll.DeleteMany(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: int32(100)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateMany(context.Background(), bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: int32(400)}}}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: int32(-1)}}}}); err != nil {
		t.Fatal(err)
	}
	waitUnready(t, tb)
	proxy.setDown(false)
	mongoConverged(t, coll, tb)
	waitReady(t, tb)
	if proxy.failed.Load() != 1 {
		t.Fatalf("the proxy failed %d resumes, want 1: the source did not resume by token", proxy.failed.Load())
	}
	if n := src.ResyncsByReason(); src.Resyncs() != 1 || n[replica.ResyncHistoryLost] != 1 {
		t.Errorf("resyncs %v, want one %s after ChangeStreamHistoryLost", n, replica.ResyncHistoryLost)
	}
}

// TestMongoDropWhileCutOffResyncs drops and recreates the collection
// while the source is cut off: its resume replays the drop (MongoDB then
// sends invalidate; the stand-in does not), which ends the stream, and
// the source must reload. What an invalidate alone does is checked in
// TestMongoEvents: the stand-in sends one only to a resume from the drop
// event's own token, which the source never keeps.
func TestMongoDropWhileCutOffResyncs(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 300)
	proxy := newWireProxy(t, m.Addr)
	tb, src := startMongoSource(t, proxy.URI(), db)
	writeSome(t, coll, 1, 100*time.Millisecond, 400)
	mongoConverged(t, coll, tb)

	proxy.setDown(true)
	waitUnready(t, tb)
	ctx := context.Background()
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{itemDoc(7, "after drop", 7), itemDoc(9000, "new", 1)}); err != nil {
		t.Fatal(err)
	}
	proxy.setDown(false)
	mongoConverged(t, coll, tb)
	waitReady(t, tb)
	if src.Resyncs() < 1 {
		t.Errorf("no resync after the collection was dropped")
	}
}

// TestMongoStalledServer makes the server stop answering without closing
// anything (a hung server, a half-open connection): the table must stop
// calling itself current within a few seconds, the stuck getMore must be
// given up, and the stream must resume by token once the server answers.
func TestMongoStalledServer(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 200)
	proxy := newWireProxy(t, m.Addr)
	// The driver's default timeouts (not the proxy's short ones): it would
	// take it 10 to 30 s to notice on its own.
	tb, src := startMongoSource(t, "mongodb://"+proxy.ln.Addr().String()+"/?directConnection=true", db)
	writeSome(t, coll, 1, 100*time.Millisecond, 300)
	mongoConverged(t, coll, tb)

	proxy.setStalled(true)
	start := time.Now()
	waitUnready(t, tb)
	t.Logf("unready %s after the server went silent", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(tb.Err().Error(), "no answer from the server") {
		t.Errorf("Err %q does not say the server stopped answering", tb.Err())
	}
	writeSome(t, coll, 1, 100*time.Millisecond, 300)
	proxy.setStalled(false)
	start = time.Now()
	mongoConverged(t, coll, tb)
	waitReady(t, tb)
	t.Logf("current again %s after the server answered again", time.Since(start).Round(time.Millisecond))
	if src.Resyncs() != 0 {
		t.Errorf("%d resyncs: a stalled server should be resumed from, not reloaded", src.Resyncs())
	}
}

// TestMongoDropWhileStreaming drops and refills the collection under a
// live stream: the drop ends the stream, and the source must reload.
func TestMongoDropWhileStreaming(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 300)
	tb, src := startMongoSource(t, m.URI, db)
	ctx := context.Background()
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{itemDoc(1, "refilled", 1), itemDoc(5000, "new", 2)}); err != nil {
		t.Fatal(err)
	}
	mongoConverged(t, coll, tb)
	waitReady(t, tb)
	if n := src.ResyncsByReason(); n[replica.ResyncStreamEnded] < 1 {
		t.Errorf("resyncs %v after a drop, want a %s", n, replica.ResyncStreamEnded)
	}
}

// TestMongoUndecodableDocuments: documents that do not decode, in the
// snapshot and in the stream, are counted and skipped; the rest applies
// and the table stays ready.
func TestMongoUndecodableDocuments(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 10)
	ctx := context.Background()
	// In the snapshot: qty of the wrong type.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(50)}, {Key: "name", Value: "bad qty"}, {Key: "qty", Value: "many"}}); err != nil {
		t.Fatal(err)
	}
	tb, src := startMongoSource(t, m.URI, db)
	// Once in the snapshot, and once more if the stream's start (the
	// start of the second, for the stand-in) replays its insert.
	snapshotErrs := src.DecodeErrors()
	if snapshotErrs < 1 || snapshotErrs > 2 {
		t.Fatalf("DecodeErrors after the snapshot = %d, want 1 (or 2 with the replay)", snapshotErrs)
	}
	// In the stream: a poison document, a key of the wrong type, and a good one.
	docs := []any{itemDoc(100, "poison", 1), bson.D{{Key: "_id", Value: "text key"}, {Key: "name", Value: "x"}, {Key: "qty", Value: int32(1)}}, itemDoc(101, "fine", 2)}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the good document arrives", func() bool { _, ok := tb.Get(101); return ok })
	if _, ok := tb.Get(100); ok {
		t.Fatal("the poison document was applied")
	}
	if _, ok := tb.Get(50); ok {
		t.Fatal("the document with a bad qty was applied")
	}
	if n := src.DecodeErrors() - snapshotErrs; n != 2 {
		t.Fatalf("%d decode errors in the stream, want 2", n)
	}
	if !tb.Ready() {
		t.Fatalf("bad documents made the replica unready: %v", tb.Err())
	}
}

func TestNewMongoSourceValidates(t *testing.T) {
	tb := replica.NewTable[int32, item]("items")
	for _, tc := range []struct {
		name, uri, db string
		bindings      []replica.Binding
	}{
		{"no bindings", "mongodb://127.0.0.1:1", "app", nil},
		{"bad uri", "postgres://x", "app", []replica.Binding{bindMongoItems(tb)}},
		{"no db", "mongodb://127.0.0.1:1", "", []replica.Binding{bindMongoItems(tb)}},
		{"bound twice", "mongodb://127.0.0.1:1", "app", []replica.Binding{bindMongoItems(tb), bindMongoItems(tb)}},
		{"system collection", "mongodb://127.0.0.1:1", "app", []replica.Binding{bindMongoItems(replica.NewTable[int32, item]("system.views"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := replica.NewMongoSource(tc.uri, tc.db, tc.bindings); err == nil {
				t.Fatal("no error")
			} else {
				t.Log(err)
			}
		})
	}
}

// TestMongoSnapshotOnPrimary: a URI that prefers secondaries must not
// send the snapshot to one. A secondary is behind the primary; a snapshot
// read there could miss writes made before the stream's start point
// (which the primary gave), and the stream would never bring them. So
// the snapshot and the stream go to the primary, the snapshot reads
// majority-committed data at or after the start point (afterClusterTime),
// and the stream starts there.
//
// The stand-in has no secondaries, no majority commit point and no
// rollback: what it can check is what the source asks for, on the wire.
// The proxy presents it as a replica set's primary so that the driver
// sends read preferences at all (to a standalone it sends none); in a
// direct connection the driver sends "primary" as primaryPreferred.
func TestMongoSnapshotOnPrimary(t *testing.T) {
	m := startStandIn(t)
	db, coll := mongoItems(t, m, 100)
	proxy := newWireProxy(t, m.Addr)
	proxy.actAsReplicaSet("rs0")
	proxy.recordCommands()
	tb, _ := startMongoSource(t, proxy.URI()+"&readPreference=secondaryPreferred", db)
	mongoConverged(t, coll, tb)

	finds := proxy.sent("find", "items")
	if len(finds) != 1 {
		t.Fatalf("%d snapshot finds, want 1", len(finds))
	}
	find := finds[0]
	t.Logf("snapshot: %s", find)
	readsPrimaryMajority(t, "snapshot", find)
	after, afterI, ok := find.Lookup("readConcern", "afterClusterTime").TimestampOK()
	if !ok {
		t.Errorf("the snapshot reads with no afterClusterTime: it may read from before the stream's start")
	}
	var streams []bson.Raw
	for _, a := range proxy.sent("aggregate", "items") {
		if _, ok := a.Lookup("pipeline", "0", "$changeStream").DocumentOK(); ok {
			streams = append(streams, a)
		}
	}
	if len(streams) == 0 {
		t.Fatal("no change stream opened")
	}
	cs := streams[0]
	t.Logf("stream: %s", cs)
	readsPrimaryMajority(t, "stream", cs)
	startT, startI, ok := cs.Lookup("pipeline", "0", "$changeStream", "startAtOperationTime").TimestampOK()
	if !ok || startT != after || startI != afterI {
		t.Errorf("the stream starts at %d.%d (set %v), the snapshot reads after %d.%d: want the same point", startT, startI, ok, after, afterI)
	}
}

// readsPrimaryMajority checks that cmd, the command the source sent for
// its snapshot or its stream (what), reads from the primary
// (primaryPreferred in a direct connection) with majority read concern.
func readsPrimaryMajority(t *testing.T, what string, cmd bson.Raw) {
	t.Helper()
	if mode, _ := cmd.Lookup("$readPreference", "mode").StringValueOK(); mode != "primaryPreferred" {
		t.Errorf("the %s's read preference is %q, want the primary (primaryPreferred in a direct connection)", what, mode)
	}
	if level, _ := cmd.Lookup("readConcern", "level").StringValueOK(); level != "majority" {
		t.Errorf("the %s's read concern is %q, want majority", what, level)
	}
}

// busyCollection starts a stand-in with a collection of 200 items, a
// wire proxy in front of it whose getMores never come back empty, and a
// writer (seeded with seed) changing the collection until stop.
func busyCollection(t *testing.T, seed uint64) (db string, coll *mongo.Collection, proxy *wireProxy, stop func()) {
	t.Helper()
	m := startStandIn(t)
	db, coll = mongoItems(t, m, 200)
	proxy = newWireProxy(t, m.Addr)
	proxy.setBusy(true)
	stop = runWriters(t, 1, func(ctx context.Context, _ int) error { return mongoWriter(ctx, coll, seed, 300) })
	return db, coll, proxy, stop
}

// TestMongoBusyCollectionBecomesReady: a collection written to faster
// than its getMores come never answers one with an empty batch (the proxy
// holds empty ones back); its table must become Ready while the writes go
// on, once the stream is past where the server was when it opened.
func TestMongoBusyCollectionBecomesReady(t *testing.T) {
	db, coll, proxy, stop := busyCollection(t, 3)
	start := time.Now()
	tb, _ := startMongoSource(t, proxy.URI(), db)
	t.Logf("ready after %s of writes, with no empty batch", time.Since(start).Round(time.Millisecond))
	stop()
	mongoConverged(t, coll, tb)
}

// TestMongoSlowServerOnBusyCollection: answers slower than the stall limit
// make the table not Ready; once they are quick again, on a collection
// whose getMores never come back empty, it is Ready again without a
// reconnect.
func TestMongoSlowServerOnBusyCollection(t *testing.T) {
	db, coll, proxy, stop := busyCollection(t, 4)
	tb, src := startMongoSource(t, proxy.URI(), db)
	proxy.setSlow(4500 * time.Millisecond) // past MongoMaxAwait (200 ms) + 3 s, within the getMore's 10 s
	waitUnready(t, tb)
	proxy.setSlow(0)
	start := time.Now()
	waitReady(t, tb)
	t.Logf("ready %s after the answers were quick again", time.Since(start).Round(time.Millisecond))
	stop()
	mongoConverged(t, coll, tb)
	if src.Resyncs() != 0 {
		t.Errorf("%d resyncs", src.Resyncs())
	}
}
