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
// The floor is hlab serve grpcfloor (package grpcfloor): the same API as a
// bare grpc-go Recv/Send loop with the gateway's transport settings
// (TransportOptions).
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
