package gateway

import (
	"sync"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A publish batch's allocations are reused from batch to batch: at a
// million messages a second they were half of what the gateway allocated
// per message, and the garbage collector's work grows with that.
//
//   - The request and its Message and Header structs come from
//     vtprotobuf's pools (PublishRequestFromVTPool), and go back once
//     accept made Kafka's records of them: the records point into the
//     batch's bytes (the codec's copy), never into the structs.
//   - A batch's records, their headers and the batch itself come from
//     batches, and go back once Kafka answered every record: franz-go
//     holds a *kgo.Record, and writes its partition and offset into it,
//     until its promise ran, and touches it no more after that.
//
// The batch's bytes are not reused: the records' keys and values point
// into them until the last promise, and the garbage collector need not
// scan them (they hold no pointers).

// recv receives the stream's next batch into a request from the pool.
func (p *publisher) recv() (*databusv1.PublishRequest, error) {
	req := databusv1.PublishRequestFromVTPool()
	if err := p.stream.RecvMsg(req); err != nil {
		req.ReturnToVTPool()
		return nil, err
	}
	return req, nil
}

var batches = sync.Pool{New: func() any { return &batch{} }}

// newBatch is a batch of n records with room for headers headers, all
// zero, from the pool.
func newBatch(p *publisher, resp *databusv1.PublishResponse, n, headers int) *batch {
	b := batches.Get().(*batch)
	b.p, b.resp = p, resp
	if b.promiseFn == nil {
		b.promiseFn = b.promise // one closure per batch, not one per record
	}
	if cap(b.recs) < n {
		b.recs = make([]kgo.Record, n)
	}
	b.recs = b.recs[:n]
	if cap(b.hs) < headers {
		b.hs = make([]kgo.RecordHeader, 0, headers)
	}
	b.remaining.Store(int32(n))
	return b
}

// release returns b to the pool once every record's promise ran. The
// records are zeroed here, so that the pool holds no batch's bytes and a
// batch from it starts from zero values (franz-go wrote each record's
// partition, offset and producer ID).
func (b *batch) release() {
	clear(b.recs)
	clear(b.hs[:cap(b.hs)])
	b.recs, b.hs = b.recs[:0], b.hs[:0]
	b.p, b.resp = nil, nil
	b.stores.Store(0)
	b.bytes.Store(0)
	batches.Put(b)
}
