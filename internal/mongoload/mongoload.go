// Package mongoload bulk-loads documents into a MongoDB collection in
// bounded steps, for the lab's and the benchmarks' seed data.
package mongoload

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Batch is the documents one InsertMany carries, and BatchTimeout how long
// one may take. A deadline on the context overrides the client's own
// operation timeout, which is sized for single reads and writes: a batch
// into a stand-in that shares a busy machine can take seconds.
const (
	Batch        = 1000
	BatchTimeout = time.Minute
)

// Insert inserts docs into coll, Batch at a time, each batch bounded by
// BatchTimeout.
func Insert(ctx context.Context, coll *mongo.Collection, docs []any) error {
	for start := 0; start < len(docs); start += Batch {
		bctx, cancel := context.WithTimeout(ctx, BatchTimeout)
		_, err := coll.InsertMany(bctx, docs[start:min(start+Batch, len(docs))])
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
