package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestMongoSource: the catalog fed by MongoDB change streams (the
// report's setup; here the stand-in) needs no Postgres, answers from its
// replica, and sees an update, a listing change and a delete.
func TestMongoSource(t *testing.T) {
	m := depstest.NewMongo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(m.URI).SetTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	data := refdata.Generate(refdatatest.Small)
	coll := client.Database("catalog").Collection(refdata.TableCustomers)
	if err := data.LoadMongoCustomers(ctx, coll); err != nil {
		t.Fatal(err)
	}

	s, err := catalog.New(ctx, catalog.Config{Source: refdata.FromMongo, Mongo: refdata.Mongo{URI: m.URI, DB: "catalog"}})
	if err != nil {
		t.Fatal(err)
	}
	refdatatest.Run(t, s)
	h := s.Handler()
	for i := 0; i < len(data.Customers); i += 331 {
		want := data.Customers[i]
		var got refdata.Customer
		if code, body := get(t, h, fmt.Sprintf("/customers/%d", want.ID), &got); code != 200 || !same(got, want) {
			t.Fatalf("customer %d: %d %s, want %+v", want.ID, code, body, want)
		}
	}

	c := data.Customers[7]
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: c.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "credit_limit_cents", Value: int64(424242)}, {Key: "name", Value: "  First LLC"}}}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the update served", func() bool {
		var got refdata.Customer
		code, _ := get(t, h, fmt.Sprintf("/customers/%d", c.ID), &got)
		return code == 200 && got.CreditLimitCents == 424242
	})
	var l catalog.Listing
	if code, body := get(t, h, "/customers?limit=1&region="+c.Region, &l); code != 200 || len(l.Customers) != 1 || l.Customers[0].ID != c.ID {
		t.Fatalf("renamed customer not listed first in %s: %d %s", c.Region, code, body)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: c.ID}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the deleted customer gone", func() bool {
		code, _ := get(t, h, fmt.Sprintf("/customers/%d", c.ID), nil)
		return code == 404
	})
}

// TestMongoSourceNeedsURI: --source=mongo without --mongo-uri says what
// to pass.
func TestMongoSourceNeedsURI(t *testing.T) {
	_, err := catalog.New(context.Background(), catalog.Config{Source: refdata.FromMongo})
	if err == nil || !strings.Contains(err.Error(), "--mongo-uri") {
		t.Fatalf("New without a MongoDB URI: %v, want an error naming --mongo-uri", err)
	}
}
