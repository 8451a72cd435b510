package gateway

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

func randomBatch(r *rand.Rand) *databusv1.PublishRequest {
	req := &databusv1.PublishRequest{BatchId: r.Uint64()}
	for range r.IntN(120) {
		m := &databusv1.Message{Key: randomBytes(r, 20), Value: randomBytes(r, 300)}
		for range r.IntN(3) {
			m.Headers = append(m.Headers, &databusv1.Header{Key: fmt.Sprintf("h-%d-ключ", r.IntN(100)), Value: randomBytes(r, 10)})
		}
		req.Messages = append(req.Messages, m)
	}
	return req
}

func randomBytes(r *rand.Rand, max int) []byte {
	n := r.IntN(max + 1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// split cuts wire into several buffers, as gRPC hands a message that
// arrived in several frames.
func split(wire []byte, r *rand.Rand) mem.BufferSlice {
	var bs mem.BufferSlice
	for len(wire) > 0 {
		n := min(len(wire), 1+r.IntN(4096))
		bs = append(bs, mem.SliceBuffer(bytes.Clone(wire[:n])))
		wire = wire[n:]
	}
	return bs
}

func TestCodecDecodesWhatProtobufEncodes(t *testing.T) {
	c := newCodec()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		want := randomBatch(r)
		wire, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // a field from a newer client is kept, not refused
			wire = protowire.AppendTag(wire, 99, protowire.BytesType)
			wire = protowire.AppendBytes(wire, []byte("from the future"))
		}
		data := split(wire, r)
		got := &databusv1.PublishRequest{}
		if err := c.Unmarshal(data, got); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		// The message must not point into gRPC's buffers, which gRPC
		// reuses once Unmarshal returns.
		for _, b := range data {
			clear(b.ReadOnlyData())
		}
		ref := &databusv1.PublishRequest{}
		if err := proto.Unmarshal(wire, ref); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, ref) {
			t.Fatalf("batch %d: the codec decoded %v, protobuf %v", i, got, ref)
		}
	}
}

func TestCodecEncodesWhatProtobufDecodes(t *testing.T) {
	c := newCodec()
	for _, size := range []int{0, 3, 5000} { // below and above gRPC's pooling threshold
		want := &databusv1.PublishResponse{BatchId: 7, Stored: 2}
		for i := range size {
			want.Errors = append(want.Errors, &databusv1.RecordError{Index: uint32(i), Code: 14, Message: "Kafka did not store the message"})
		}
		data, err := c.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &databusv1.PublishResponse{}
		if err := proto.Unmarshal(data.Materialize(), got); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if !proto.Equal(got, want) {
			t.Fatalf("%d errors: protobuf decoded %v from the codec's %v", size, got, want)
		}
	}
}

func TestCodecRefusesBadInput(t *testing.T) {
	c := newCodec()
	bad := &databusv1.PublishRequest{Messages: []*databusv1.Message{{Headers: []*databusv1.Header{{Key: "ok"}}}}}
	wire, err := proto.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	wire = bytes.Replace(wire, []byte("ok"), []byte{0xff, 0xfe}, 1)
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &databusv1.PublishRequest{}); err == nil {
		t.Error("a header key that is not UTF-8 was accepted; protobuf refuses it")
	}
	if err := proto.Unmarshal(wire, &databusv1.PublishRequest{}); err == nil {
		t.Error("protobuf accepted it too: the test's input is wrong")
	}
	full, err := proto.Marshal(&databusv1.PublishRequest{Messages: []*databusv1.Message{{Value: []byte("value")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(full[:len(full)-1])}, &databusv1.PublishRequest{}); err == nil {
		t.Error("a truncated batch was accepted")
	}
}

func TestCodecFallsBackForOtherMessages(t *testing.T) {
	c := newCodec()
	want := &healthpb.HealthCheckRequest{Service: "databus.v1.DataBus"}
	data, err := c.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := &healthpb.HealthCheckRequest{}
	if err := c.Unmarshal(data, got); err != nil || got.Service != want.Service {
		t.Fatalf("health request through the codec: %v, %v", got, err)
	}
}

func BenchmarkUnmarshalBatch(b *testing.B) {
	// The checker's throughput batch: 100 messages of 100 bytes, a header each.
	req := &databusv1.PublishRequest{BatchId: 1}
	for range 100 {
		req.Messages = append(req.Messages, &databusv1.Message{Value: bytes.Repeat([]byte{'x'}, 100), Headers: []*databusv1.Header{{Key: "run", Value: []byte("12345678")}}})
	}
	wire, _ := proto.Marshal(req)
	data := mem.BufferSlice{mem.SliceBuffer(wire)}
	for _, bc := range []struct {
		name string
		c    interface {
			Unmarshal(mem.BufferSlice, any) error
		}
	}{{"vtproto", newCodec()}, {"protobuf", newCodec().fallback}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.c.Unmarshal(data, &databusv1.PublishRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
