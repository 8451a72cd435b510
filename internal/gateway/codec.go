package gateway

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// codec is the gateway's gRPC codec for the databus messages: the code
// vtprotobuf generated for them (api/databus/v1/databus_vtproto.pb.go)
// instead of protobuf's reflection, which took a third of the gateway's
// CPU per published message (its allocations, a copy per key and value,
// and the garbage collection they cost). Other messages (health) go to
// gRPC's own proto codec. The wire format is protobuf's either way:
// clients need nothing.
//
// A batch is copied once out of gRPC's buffers, which gRPC reuses, into
// a slice of its own; its messages' keys and values point into that slice
// (UnmarshalVTUnsafe) instead of each being copied. A publish stream's
// batch (pooledBytes) takes that slice from gRPC's buffer pool and gives
// it back once Kafka answered its records (batchpool.go); any other
// message's slice lives as long as something points into it.
type codec struct{ fallback encoding.CodecV2 }

func newCodec() codec { return codec{fallback: encoding.GetCodecV2(protoenc.Name)} }

// Name is "proto": the content subtype clients send.
func (codec) Name() string { return protoenc.Name }

type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

type vtUnmarshaler interface {
	UnmarshalVTUnsafe([]byte) error
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMarshaler)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if req, ok := v.(*databusv1.PublishRequest); ok {
		if pooledBytes.listed(req) {
			return unmarshalPooled(req, data)
		}
	}
	m, ok := v.(vtUnmarshaler)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	if err := m.UnmarshalVTUnsafe(copyOut(data)); err != nil {
		return err
	}
	return validUTF8(v)
}

// pooledBytes are the publish requests being received by a publish
// stream (publisher.recv, batchpool.go), each with the buffer from gRPC's
// pool its batch was copied into (nil until then): their keys and
// values point into it, and the stream gives it back once Kafka answered
// every record. Requests not listed here (another message, or a Gateway
// served by a grpc.Server of the caller's with another codec, which
// copies each key and value) are copied into a slice of their own.
//
// A map under a mutex, not a sync.Map: every publish stream waiting in
// Recv is listed, and a sync.Map's entry cost about 350 bytes of heap per
// idle stream (its trie's nodes), a map's about 30.
var pooledBytes = receivingRequests{m: map[*databusv1.PublishRequest]*[]byte{}}

type receivingRequests struct {
	mu sync.Mutex
	m  map[*databusv1.PublishRequest]*[]byte
}

// list lists req, with no bytes yet.
func (r *receivingRequests) list(req *databusv1.PublishRequest) {
	r.mu.Lock()
	r.m[req] = nil
	r.mu.Unlock()
}

func (r *receivingRequests) listed(req *databusv1.PublishRequest) bool {
	r.mu.Lock()
	_, ok := r.m[req]
	r.mu.Unlock()
	return ok
}

// set gives listed req its bytes.
func (r *receivingRequests) set(req *databusv1.PublishRequest, buf *[]byte) {
	r.mu.Lock()
	r.m[req] = buf
	r.mu.Unlock()
}

// take unlists req and returns its bytes (nil if none).
func (r *receivingRequests) take(req *databusv1.PublishRequest) *[]byte {
	r.mu.Lock()
	buf := r.m[req]
	delete(r.m, req)
	r.mu.Unlock()
	return buf
}

// unmarshalPooled decodes a listed request from a pooled copy of data.
func unmarshalPooled(req *databusv1.PublishRequest, data mem.BufferSlice) error {
	pool := mem.DefaultBufferPool()
	buf := pool.Get(data.Len())
	data.CopyTo(*buf)
	if err := req.UnmarshalVTUnsafe(*buf); err != nil {
		pool.Put(buf)
		return err
	}
	pooledBytes.set(req, buf) // the receiver's to give back, valid or not
	return validUTF8(req)
}

// copyOut copies data into a new slice that nothing else holds, so that a
// message may point into it. Unlike data.Materialize it does not zero the
// slice first (bytes.Join allocates without zeroing): a batch is written
// over whole.
func copyOut(data mem.BufferSlice) []byte {
	if len(data) == 1 {
		return bytes.Clone(data[0].ReadOnlyData())
	}
	parts := make([][]byte, len(data))
	for i, b := range data {
		parts[i] = b.ReadOnlyData()
	}
	return bytes.Join(parts, nil)
}

// validUTF8 checks the string fields a client sends, as protobuf's own
// unmarshaling does for proto3 strings and vtprotobuf's does not.
func validUTF8(v any) error {
	req, ok := v.(*databusv1.PublishRequest)
	if !ok {
		return nil // SubscribeRequest has no string fields
	}
	for i, m := range req.Messages {
		for _, h := range m.Headers {
			if !utf8.ValidString(h.Key) {
				return fmt.Errorf("proto: message %d: header key %q is not valid UTF-8", i, h.Key)
			}
		}
	}
	return nil
}
