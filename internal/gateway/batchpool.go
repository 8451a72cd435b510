package gateway

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/mem"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// A publish batch's allocations are reused from batch to batch: at a
// million messages a second they were most of what the gateway allocated
// per message, and the garbage collector's work grows with that.
//
//   - The request and its Message and Header structs come from
//     vtprotobuf's pools (PublishRequestFromVTPool), and go back once
//     accept made Kafka's records of them: the records point into the
//     batch's bytes, never into the structs.
//   - The batch's bytes, copied out of gRPC's buffers (codec.go), come
//     from gRPC's buffer pool and go back, with the batch's records,
//     headers and the batch itself (batches), once Kafka answered every
//     record: the records' keys and values point into them, and franz-go
//     holds a *kgo.Record, writing its partition and offset into it,
//     until its promise ran, and touches it no more after that.
//
// A server interceptor may read a received request while the handler's
// RecvMsg returns it, as ever, but not keep it: accept hands it back to
// the pool.

// recv receives the stream's next batch into a request from the pool,
// its bytes into a pooled buffer (pooledBytes) that it returns for
// accept. An echo batch is never accepted: its bytes are the codec's own
// copy, and buf is nil.
func (p *publisher) recv() (req *databusv1.PublishRequest, buf *[]byte, err error) {
	req = databusv1.PublishRequestFromVTPool()
	if !p.g.cfg.Echo {
		pooledBytes.list(req)
	}
	err = p.stream.RecvMsg(req)
	if !p.g.cfg.Echo {
		buf = pooledBytes.take(req)
	}
	if err != nil {
		freeBytes(buf)
		returnRequest(req)
		return nil, nil, err
	}
	return req, buf, nil
}

// returnRequest gives a received request back to vtprotobuf's pool,
// without the batch's bytes: ResetVT keeps each key's and value's slice,
// emptied, to be reused, and so the batch's bytes, which they point into,
// stayed reachable from the pool for as long as the request lay there, or
// was held by a stream waiting in Recv for its next batch. 200 streams
// that each sent a 2 MiB batch kept 400 MiB of them alive, past the
// gateway's bytes budget, and an idle stream kept its last batch.
func returnRequest(req *databusv1.PublishRequest) {
	for _, m := range req.Messages {
		m.Key, m.Value = nil, nil
		for _, h := range m.Headers {
			h.Value = nil
		}
	}
	req.ReturnToVTPool()
}

// freeBytes gives a batch's bytes back to gRPC's pool.
func freeBytes(buf *[]byte) {
	if buf != nil {
		mem.DefaultBufferPool().Put(buf)
	}
}

var batches = sync.Pool{New: func() any { return &batch{} }}

// newBatch is a batch of n records with room for headers headers, all
// zero, from the pool; it owns buf, the bytes its records point into.
func newBatch(p *publisher, resp *databusv1.PublishResponse, buf *[]byte, n, headers int) *batch {
	b := batches.Get().(*batch)
	b.p, b.resp, b.buf = p, resp, buf
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

// release returns b and its bytes to their pools once every record's
// promise ran. The records are zeroed here, so that the pool holds no batch's bytes and a
// batch from it starts from zero values (franz-go wrote each record's
// partition, offset and producer ID).
func (b *batch) release() {
	clear(b.recs)
	clear(b.hs[:cap(b.hs)])
	b.recs, b.hs = b.recs[:0], b.hs[:0]
	freeBytes(b.buf)
	b.p, b.resp, b.buf = nil, nil, nil
	b.stores.Store(0)
	b.bytes.Store(0)
	batches.Put(b)
}
