// Package gateway is the server side of databus: gRPC bidirectional
// streams in front of Kafka (report D). Publish streams get a producer of
// their own (latency first) or share the gateway's (aggregation: batching
// first), one shared producer per codec the streams ask for (compression.go);
// the subscribe streams of one group and topic on a gateway share
// one consumer-group member, one Kafka client, that spreads its partitions
// over them (member.go) and commits offsets only as far as the clients
// acked. It is stateless: any number of gateways serve the same topics and
// groups, and Kafka's group protocol balances partitions over gateways.
// Streams, Kafka clients and bytes in flight are bounded (limits.go).
// Streams move: off connections older than --max-connection-age, and off
// every connection when the gateway stops (Stop), they end in good order
// and their clients reopen them elsewhere through the load balancer
// (moving.go).
//
// # Where the CPU and memory go
//
// Measured with bench/databus.sh and pprof (--admin-addr): the gateway on
// one core (GOMAXPROCS=1, taskset), the checker on the other, 2-core VM.
// bench/grpcfloor is the floor: the same API as a bare grpc-go Recv/Send
// loop with the gateway's transport settings (TransportOptions).
//
// Echo, 50 clients each on its own connection, one message in flight:
// about 13 µs of CPU per round trip, 75,000-80,000 round trips per CPU-second,
// the same as the floor (the gateway at 0.97x of it). Over half of it is
// the kernel: one write, one read and one read that finds nothing (Go's
// poller then parks the reader) per round trip, the write alone 38% (on
// loopback it delivers to the client and wakes it). A plain Go TCP echo
// server spends about 7.5 µs per round trip here. The rest is grpc-go:
// HTTP/2 framing, a reader, a writer and a handler goroutine handing each
// message on. Answering echo batches on the receiving goroutine, not the
// stream's (publish.go), cut runtime.selectgo from 8% to 3% of the profile
// without a gain above the noise. Without a write buffer (WriteBufferSize
// 0) grpc-go writes each frame alone and the floor halves. So the lab's
// target of 100,000 per CPU-second (10 µs) is below what grpc-go costs on
// such a machine; clients that pipeline cost 4.5 µs per message.
//
// Publish, 10 clients sending batches of 100: 1.45 µs of CPU per message
// before, about 1.1 µs now, against 0.6 µs for franz-go producing the same
// batches itself. Protobuf's reflection took 31% (an allocation per message,
// a copy per key and value, UTF-8 checks); the codec (codec.go) decodes with
// vtprotobuf's generated code into one copy of the batch, 19%. A batch's
// records are one allocation with one promise and one timestamp
// (franz-go read the clock per record). What remains beyond the producer's
// own work: receiving and decoding the batch, the garbage collector (15%),
// and the answer.
//
// Subscribe, 1 group x 4 members draining a topic filled beforehand
// (through kfake), batches of 100 acked as they come: 0.86 µs of gateway
// CPU per delivered message (0.92 µs before the cut below; medians of
// three alternating rounds), against 0.34-0.46 µs for franz-go consumers
// that fetch the same records themselves, ack the same way and commit
// only what they acked (databus-checker --direct --consume only): about
// 2.4x, where the lab's target is 1.3x; the lab, whose gateway runs
// GOMAXPROCS=2 unpinned, measures 1.35 µs against 0.38 µs. Over a third
// of the gateway's CPU is franz-go's own fetching (decompressing and
// decoding record batches: 33%), about all the direct consumer spends.
// The rest is the gateway's: records turned into protobuf messages (11%)
// and sent (9%), acks received (8%; vtprotobuf allocates an Ack per
// acked message), grpc-go's writer (8%), and the garbage collector (28%:
// its background marking 18%, the assists it asks of allocating
// goroutines 10%). The conversion made three objects per message (the
// message, its header slice, its header), a quarter of the objects a
// drain allocated; a response's messages, headers and header pointers
// are now three allocations in all (consumedMessages): the conversion
// fell from 17% of the CPU to 11%, allocating from 34% to 23%, and the
// collector's assists from 14% to 10% (pprof over five drains before,
// three after). A partition's window of offsets, which fills with each
// batch and empties with its acks, reallocated its ring at each doubling
// and halving (3% of the bytes a drain allocated); rings now go back to a
// pool (tracker.go: 23 KB and 22 µs per cycle of 300 offsets down to
// 0.2 KB and 4.6 µs), a gain within the noise of a drain here.
// What remains above the direct consumer is grpc-go's work per message
// sent and acked, and the conversion itself (9%, most of it zeroing and
// write barriers): marshaling straight from franz-go's records would skip
// it, but grpc-go gives a server's message to its codec, and a server
// built without the gateway's codec cannot marshal a type that is not a
// protobuf message. A drain runs at 90,000-165,000 messages a second
// with the gateway at 0.1-0.2 of a core: the members' gRPC clients and
// kfake on the other core set the pace, not the gateway.
//
// Idle streams: 21 KB each at 10 per connection and 39 KB with a
// connection each, against the floor's 15 and 33 KB (25 and 43 KB before
// the codec: protobuf's reflection had grown each receiving goroutine's
// stack). Most of it is goroutine stacks: grpc-go keeps a reader, a
// writer and a keepalive goroutine per connection and a handler per
// stream, and the gateway a second goroutine per publish stream that
// blocks in Recv, so that a drain can end a stream whose client sends
// nothing (grpc-go gives a handler no way to interrupt its own Recv).
// That goroutine is most of the gateway's 5-6 KB above the floor.
package gateway
