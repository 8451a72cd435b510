package deps

import (
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/highload-lab/hlab/internal/testkit"
)

// skipWithoutMongo skips t when the stand-in cannot run here (no JDK, or
// no jars and no mvn), unless HLAB_REQUIRE_DEPS is set.
func skipWithoutMongo(t *testing.T) {
	t.Helper()
	s, err := CheckMongo()
	if err == nil && s.JavaErr != nil {
		err = s.JavaErr
	}
	if err == nil && !s.Cached && s.Maven == "" {
		err = ErrMongoNeedsMaven
	}
	if err != nil {
		testkit.SkipMissing(t, "the MongoDB stand-in", err)
	}
}

// TestMongoStandIn starts the stand-in, writes and reads through the Go
// driver, follows a collection's change stream, and checks the quirks
// that DEPENDENCIES.md and mongo.go list, so that a new version of the
// stand-in that changes them is noticed.
func TestMongoStandIn(t *testing.T) {
	skipWithoutMongo(t)
	sb := testSandbox(t)
	ctx := context.Background()
	start := time.Now()
	m, err := StartMongo(ctx, sb, MongoConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	t.Logf("started %s at %s in %s", m.Kind, m.URI, time.Since(start).Round(time.Millisecond))
	if m.Kind != "mongo-java-server 1.47.0 (MongoDB stand-in)" || !m.StandIn {
		t.Errorf("Kind %q, StandIn %v: the stand-in must say it is one", m.Kind, m.StandIn)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(m.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("app").Collection("users")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ann"}}, bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}}}); err != nil {
		t.Fatal(err)
	}
	var got struct{ Name string }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&got); err != nil || got.Name != "bob" {
		t.Fatalf("find: %+v, %v", got, err)
	}

	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "ann2"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	other := client.Database("app").Collection("other")
	if _, err := other.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var events []bson.Raw
	deadline := time.Now().Add(10 * time.Second)
	for len(events) < 3 && time.Now().Before(deadline) {
		if cs.TryNext(ctx) {
			events = append(events, append(bson.Raw(nil), cs.Current...))
			continue
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(events) < 3 {
		t.Fatalf("got %d change events, want 3 (update, delete, and the stand-in's drop of another collection): %v", len(events), events)
	}
	op := func(i int) string { s, _ := events[i].Lookup("operationType").StringValueOK(); return s }
	if op(0) != "update" || op(1) != "delete" {
		t.Fatalf("events %v", events)
	}
	if name, _ := events[0].Lookup("fullDocument", "name").StringValueOK(); name != "ann2" {
		t.Errorf("update's fullDocument (updateLookup) = %v, want the updated document", events[0].Lookup("fullDocument"))
	}
	if id := events[1].Lookup("documentKey", "_id"); id.IsZero() {
		t.Errorf("delete's documentKey has no _id: %v", events[1])
	}
	// The quirks: each is a difference from MongoDB that code must not
	// rely on, and that tests against the stand-in must allow for.
	if id := events[0].Lookup("documentKey", "_id"); !id.IsZero() {
		t.Logf("quirk gone? the update's documentKey has an _id now: %v", events[0].Lookup("documentKey"))
	} else {
		t.Logf("quirk: an update's documentKey is %v, not {_id: 1}", events[0].Lookup("documentKey"))
	}
	if op(2) == "drop" && events[2].Lookup("ns").IsZero() {
		t.Logf("quirk: dropping another collection of the database shows as a drop without ns on this stream")
	} else {
		t.Logf("quirk gone? third event %v", events[2])
	}
	// An insert refused for a duplicate key still becomes an event.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "refused"}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate insert: %v, want a duplicate key error", err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for cs.Err() == nil && time.Now().Before(deadline) {
		if cs.TryNext(ctx) {
			if name, _ := cs.Current.Lookup("fullDocument", "name").StringValueOK(); name == "refused" {
				t.Logf("quirk: a refused insert shows as an insert event: %v", cs.Current)
			} else {
				t.Logf("quirk gone? event after a refused insert: %v", cs.Current)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ping bson.Raw
	if ping, err = client.Database("app").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw(); err == nil && ping.Lookup("operationTime").IsZero() {
		t.Logf("quirk: replies carry no operationTime: %v", ping)
	}

	mustStop(t, "the stand-in", m.Proc(), m.Stop)
	if m.Proc() != nil {
		t.Error("Proc() after Stop is not nil")
	}
	if _, err := os.Stat(m.Dir); !os.IsNotExist(err) {
		t.Errorf("the temporary dir %s is still there after Stop", m.Dir)
	}
}
