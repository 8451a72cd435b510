package refdata

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/mongoload"
	"github.com/highload-lab/hlab/replica"
)

// Mongo is where a replica with Source FromMongo reads: report B's own
// setup, a replica kept fresh by MongoDB change streams (Watch). Each
// table is a collection of the same name, each document a row whose _id
// is the row's id and whose other fields are named as the columns. A
// delete event carries only _id, so a table keyed by other fields
// (price_rules, by category and zone) cannot apply deletes from MongoDB:
// they are counted as decode errors. The catalog's customers, keyed by
// id, can.
type Mongo struct {
	// URI is a MongoDB connection string (required with FromMongo).
	URI string
	// DB is the database holding the collections (default "hlab").
	DB string
}

// DefaultMongoDB is Mongo.DB's default.
const DefaultMongoDB = "hlab"

// RegisterFlags adds the MongoDB flags to fs.
func (m *Mongo) RegisterFlags(fs *flag.FlagSet) {
	cliflag.SecretVar(fs, &m.URI, "mongo-uri", "MONGODB_URI", "with --source=mongo: MongoDB connection string, e.g. mongodb://127.0.0.1:27017/?replicaSet=rs0")
	fs.StringVar(&m.DB, "mongo-db", DefaultMongoDB, "with --source=mongo: database holding the collections (one per table, named as it)")
}

// NewMongoReplica binds set to a MongoDB source (replica.MongoSource) on
// m, one collection per table, and registers its metrics with reg as
// NewReplica does (source label "mongo"). A commit time in
// replica_lag_seconds is the change event's wallTime (MongoDB 6.0+), else
// its clusterTime, which counts whole seconds only. maxStaleness is as
// for NewReplica (replica.MongoMaxStaleness).
func NewMongoReplica(m Mongo, set Set, reg prometheus.Registerer, logger *slog.Logger, maxStaleness time.Duration) (*Replica, error) {
	if m.URI == "" {
		return nil, ErrNoMongoURI
	}
	logger = cmp.Or(logger, slog.Default())
	return newReplica(set, reg, "mongo", func(t table) replica.Binding { return t.doc },
		func(bindings []replica.Binding) (source, error) {
			return replica.NewMongoSource(m.URI, m.DB, bindings, replica.MongoLogger(logger), replica.MongoMaxStaleness(maxStaleness))
		})
}

// docRow turns a document into the row the decoders expect: _id is the
// id column, and BSON dates are time.Time, as pgx gives timestamps. The
// same decoders then check rows from either database.
func docRow(r replica.Row) replica.Row {
	out := make(replica.Row, len(r))
	for k, v := range r {
		if k == "_id" {
			k = "id"
		}
		if d, ok := v.(bson.DateTime); ok {
			v = d.Time().UTC()
		}
		out[k] = v
	}
	return out
}

// fromDoc makes a decoder of rows into one of documents.
func fromDoc[T any](f func(replica.Row) (T, error)) func(replica.Row) (T, error) {
	return func(r replica.Row) (T, error) { return f(docRow(r)) }
}

// CustomerDoc is c as a document of the customers collection.
func CustomerDoc(c Customer) bson.D {
	return bson.D{
		{Key: "_id", Value: c.ID}, {Key: "name", Value: c.Name}, {Key: "region", Value: c.Region},
		{Key: "email", Value: c.Email}, {Key: "phone", Value: c.Phone},
		{Key: "credit_limit_cents", Value: c.CreditLimitCents}, {Key: "updated_at", Value: c.UpdatedAt},
	}
}

// LoadMongoCustomers inserts the dataset's customers into coll, 1,000 per
// round trip, each bounded by a minute.
func (d *Dataset) LoadMongoCustomers(ctx context.Context, coll *mongo.Collection) error {
	docs := make([]any, len(d.Customers))
	for i, c := range d.Customers {
		docs[i] = CustomerDoc(c)
	}
	if err := mongoload.Insert(ctx, coll, docs); err != nil {
		return fmt.Errorf("refdata: load customers into MongoDB: %w", err)
	}
	return nil
}
