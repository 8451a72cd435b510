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
// message on. Answering echo batches on the goroutine that receives them,
// with no hand-off (publish.go), cut runtime.selectgo from 8% to 3% of the
// profile without a gain above the noise; the stream's handler now
// receives them itself. The lab measures the floor in the same rounds as
// the gateway at 1 CPU and GOMAXPROCS=1, and bounds the gateway's ratio to
// it (>= 0.95x). Without a write buffer (WriteBufferSize
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
// Idle streams (10,000, each sent one batch, answered, then nothing;
// bench/databus.sh's idle section, two runs): 16.1-16.7 KB of RSS each at
// 10 per connection and 35.1-35.3 KB with a connection each, against the
// floor's 15.2-15.3 and 33.7-33.8 KB measured next to it: 0.8-1.6 and
// 1.3-1.5 KB above it. Before, 23.5 and 44.6 KB against 15.4 and 33.1: 8.1
// and 11.5 KB above (the profiles below: a run at 48.9 KB a stream against
// 37.8 with a connection each, --admin-addr, heap?gc=1). Two costs were
// the gateway's own. Its
// gate (recvgate.go) wraps each connection, which hid the socket from
// grpc-go: grpc-go then gave each connection a 32 KiB read buffer of its
// own (bufio.NewReaderSize: 323 MB, 72% of the heap in use at 10,000
// connections, the pages reads had touched resident) instead of reading
// into pooled buffers taken only while bytes are there, as it does for a
// bare *net.TCPConn; the gate's connection now offers grpc-go that read
// (readyconn.go). And each publish stream kept a second goroutine
// blocked in Recv, so that a drain could end a stream whose client sends
// nothing (50,019 goroutines against the floor's 40,013, 41 MB more
// stack); the handler now reads its batches itself, a sender runs only
// while answers are due, and a drain or a GOAWAY ends a stream by writing
// its status through grpc-go's transport stream, which returns the
// blocked Recv (publish.go, moving.go): 40,019 goroutines. What is left
// is little state and much garbage. After a forced collection the
// gateway's live heap is 1.0 KB per stream above the floor's (142 against
// 132 MB, a connection each), by the sampled heap profile chiefly the
// gate's connection (its struct, maps and the ready reader: 0.6-0.9 KB per
// connection) and the publisher (0.5 KB). Before that collection it was
// 2.6 KB above (161 against 135 MB): the rest of the RSS is garbage not
// yet collected when RSS is read. A stream's settings were read from a
// copy of all its metadata (1.3 KB of garbage a stream, by the alloc
// profile), now key by key (settings.go); what remains is each stream's
// first message going to Kafka through franz-go (records, requests,
// answers), where the floor's echo stores nothing.
package gateway
