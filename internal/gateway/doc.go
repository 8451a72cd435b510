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
// With --tokens each token may also carry a quota on this gateway
// (quota.go): past its publish rate its publish streams are read more
// slowly, past its streams a new one is refused.
// Streams move: off connections older than --max-connection-age, and off
// every connection when the gateway stops (Stop), they end in good order
// and their clients reopen them elsewhere through the load balancer
// (moving.go).
//
// # Replay from a time or an offset
//
// A subscribe stream with x-databus-start-time or x-databus-start-offsets
// is a replay (replay.go): it reads the topic with a Kafka client of its
// own, read committed, that joins no group and commits nothing, from
// each partition's first message at or after the time, or from the
// offsets given (below a partition's log start: from the log start; past
// its end: waiting there). With x-databus-replay-end: now it ends with OK
// at the last stable offsets the partitions had when it opened; without,
// it tails until the client closes its side. Where it starts and ends is
// resolved once, at open. It takes a place of --max-kafka-clients, reads
// at most a batch ahead of what it sent, and ends on a drain or an old
// connection as other streams do; its client reopens it from after the
// last messages it received (the Go client's Replay does).
//
// # Reconnects and transactions
//
// A group member outlives its streams for a grace (--member-grace, 5 s,
// at most --session-timeout; member.go, membergrace.go). When the last
// stream of a group and topic on a gateway ends, what it acked is
// committed at once and its partitions stay assigned to the member,
// unowned and paused, with their unacked messages set back to be
// delivered again. A stream of that group and topic that opens here
// within the grace takes them all without a rebalance; when the grace
// ends with none, the member leaves the group as it did at once before.
// So a client that reopens its stream after a handler error or a dropped
// connection costs its group no rebalance, where a leave and a join cost
// two, each pausing the whole group: ten reopens in a second rebalanced a
// group twenty times without the grace, not once with it
// (TestReconnectInGraceIsNoRebalance). Streams the gateway itself ends
// (a drain, a move off an aged connection) leave at once: their clients
// are sent elsewhere. Close does not wait for graces. The member's Kafka
// client keeps its place in --max-kafka-clients meanwhile.
//
// Members read committed (--isolation-level read_committed): records of
// aborted transactions are never delivered, and records behind a
// transaction still open wait for it to end (a fetch stops at the last
// stable offset, which for topics without transactions is the high
// watermark, so they pay nothing). read_uncommitted delivers everything
// as soon as it is stored. GroupConsumerOpts carries the level, so the
// checker's direct consumer reads as the gateway does.
//
// # Nacks, retries and dead letters
//
// A client nacks a message it cannot process now (SubscribeRequest.nacks,
// with a delay and a reason). The message stays in its partition's window
// (tracker.go), waiting: the commit point never passes it, so a gateway
// that dies before the redelivery has it delivered again from the
// committed offset, and a waiting message is not counted unacked (a
// draining stream does not wait for it). The group's member keeps a retry
// per nacked message in a heap by due time (retry.go). The gateway keeps
// no delivered record's bytes (that would hold every unacked message in
// memory, x-databus-max-unacked of them per stream), so a retry that comes
// due has its record fetched again by the member's retry reader
// (retryreader.go): a Kafka client of its own, outside the group, made
// when first needed and closed after a minute with nothing asked. It reads
// each partition with due retries from the smallest asked offset and
// hands the asked records over: sent to the stream that has the partition
// (before its queue, with delivery_count one higher), or written as dead
// letters. The group's fetch position never moves for a retry, so the
// partition's later messages keep flowing. An asked offset that a later
// record passes is gone from Kafka (retention, compaction): it is logged,
// counted (databus_retries_vanished_total) and acked, as it cannot be
// delivered. The reader takes no --max-kafka-clients place of its own: a
// member with retries uses two clients' connections. The cost is that
// re-read, paid only by members with due retries: deliveries take their
// old path, plus a length check for delivery counts, while a member has
// no retry.
//
// Delivery counts are kept only for offsets delivered more than once,
// and forgotten when the commit passes them. A partition that moves
// between the gateway's streams keeps its retries and counts (its unacked
// messages count one more delivery); one that leaves the member drops
// them, and its next owner starts from the committed offset at count 1.
//
// With x-databus-max-deliveries, a message nacked at that delivery count
// is written to its dead-letter topic (deadletter.go) through the shared
// producer (acks=all, idempotent) with the original key, value,
// timestamp and headers and the six databus-* headers, and only once
// Kafka stored it is its offset acked. A failed write is tried again
// after a backoff (1 s doubling, at most 30 s and --max-nack-delay), the
// message waiting meanwhile. Bounds: --max-nack-delay (longer delays are
// cut), --max-pending-retries for the gateway (a nack past it ends its
// stream with ResourceExhausted), --max-deliveries, reasons cut to 1024
// bytes; per stream, waiting messages count against
// x-databus-max-unacked.
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
// Publish, 10 clients sending batches of 100, 16 in flight, aggregation
// off: 1.45 µs of CPU per message at first; about 1.1 µs once the codec
// (codec.go) decoded with vtprotobuf's generated code into one copy of
// the batch instead of protobuf's reflection (31% of the profile: an
// allocation per message, a copy per key and value, UTF-8 checks), a
// batch's records were one allocation with one promise and one
// timestamp (franz-go read the clock per record); then 0.70-0.78 µs
// beside franz-go's 0.41-0.51 µs producing the same batches itself
// (databus-checker --direct), each as fast as it goes, when the garbage
// collector took 9% and malloc 23%: the gateway allocated 464 bytes and
// 3.3 objects per message. Now 0.41-0.46 µs, 0.91-1.03x the direct
// producer's in the same rounds: a batch's request structs come from
// vtprotobuf's pool, its bytes from gRPC's buffer pool, its records,
// headers and promise from a pool of batches, all given back once Kafka
// answered every record (batchpool.go); 11 bytes and 0.11 objects per
// message, the garbage collector and malloc under 1% each. CPU profile
// (4 s, pprof -top), before:
//
//	flat%  cum%
//	12.2%  12.2%  syscall.Syscall6
//	 6.8%   9.1%  runtime.tryDeferToSpanScan
//	 3.6%   7.2%  runtime.scanObject
//	 2.7%  11.8%  databusv1.(*Message).UnmarshalVTUnsafe
//	        25.8%  gateway.codec.Unmarshal
//	        23.1%  runtime.mallocgc
//	        21.3%  gateway.(*publisher).accept
//	         8.6%  runtime.gcBgMarkWorker
//
// after:
//
//	flat%  cum%
//	17.4%  17.4%  syscall.Syscall6
//	 5.8%   5.8%  sync.(*Mutex).Lock (franz-go's Produce, per record)
//	 4.4%   8.0%  databusv1.(*Message).UnmarshalVTUnsafe
//	 3.6%   8.7%  kgo.(*recBuf).bufferRecord
//	        31.2%  gateway.(*publisher).accept (23.9% of it kgo.(*Client).produce)
//	        17.4%  kgo.(*broker).handleReqs
//	        13.8%  gateway.codec.Unmarshal
//	         0.7%  runtime.gcBgMarkWorker, 0.7% runtime.mallocgc
//
// What is left beyond the direct producer's own work is receiving the
// batch from gRPC and decoding it (codec.Unmarshal, 14%) and the answer;
// the rest is franz-go's, which the direct producer pays the same.
//
// Run as fast as each goes, the two do not compare like for like: a
// producer's cost per message falls as its produce requests fill (at
// 200,000 msgs/s both spend up to twice what they do at full speed), and
// the direct producer, with CPU 0 to itself while the gateway's clients
// share CPU 1 with Kafka, runs faster and puts about 1,600 records in
// each request where the gateway puts about 390. So the target's pair offers both
// sides the same rate (databus-checker --rate, 200,000 msgs/s), where
// each puts 110-490 records in a request, varying from run to run with
// Kafka's answer time: 0.66-1.24 µs for the gateway against 0.65-1.15 µs
// (0.78-1.14x by round), 0.88-1.46 µs before (1.04-1.38x). Figures from
// a 2-core machine shared with other work (load average 5-10), three
// alternating rounds each.
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
// gateway's live heap was 1.0 KB per stream above the floor's (142
// against 132 MB, a connection each), by the sampled heap profile chiefly
// the gate's connection (its struct, maps and the ready reader: 0.6-0.9 KB
// per connection) and the publisher (0.5 KB). Before that collection it
// was 2.6 KB above (161 against 135 MB): the rest of the RSS is garbage
// not yet collected when RSS is read. A stream's settings were read from
// a copy of all its metadata (1.3 KB of garbage a stream, by the alloc
// profile), now key by key (settings.go). Then, per stream waiting in
// Recv: the requests being received were listed in a sync.Map (its trie's
// nodes, about 350 bytes a stream: a map under a mutex now, codec.go);
// each publisher held its answer channel (224 bytes; the sender takes one
// from a pool while answers are due, publish.go); and the pooled request
// a stream waits with kept its last batch's bytes alive, since
// vtprotobuf's ResetVT keeps each key and value slice, emptied
// (returnRequest, batchpool.go; the receive budget's test caught it: 200
// streams of 2 MiB batches kept 400 MiB). Per connection, the ready
// reader and the gate's connection are one allocation, and the gate's
// map of grants is made at a connection's first grant. The live heap
// after a forced collection (go_memstats_alloc_bytes after heap?gc=1,
// 10,000 idle streams): 143.6 -> 139.5 MB a connection each, 58.1 -> 55.7
// MB at 10 per connection (0.41 and 0.24 KB a stream less); what the
// run allocated, 193.8 -> 185.7 MB. The gateway's own share of the
// sampled heap in use (-sample_index=inuse_space, a connection each;
// flat, cum):
//
//	before: 5.50MB  5.50MB gateway.(*recvGate).wrap
//	           5MB 11.02MB gateway.(*Gateway).Publish
//	        1.02MB  1.02MB gateway.(*Gateway).addPublisher
//	        0.50MB  0.50MB gateway.readyConnOf
//	             0     5MB gateway.(*publisher).recv (its sync.Map.Store)
//	after:     3MB  9.01MB gateway.(*Gateway).Publish
//	        2.50MB  2.50MB gateway.(*recvGate).add
//	        1.50MB     4MB gateway.(*recvGate).gateConn
//	           1MB     1MB gateway.(*publisher).sendAnswers (pooled channels)
//	        0.51MB  0.51MB gateway.(*receivingRequests).list
//
// bench/databus.sh's idle section (ONLY=idle KAFKA_REAL=0 ROUNDS=1, four
// runs each, before and after alternating, at load averages of 4-10 from
// other work): at 10 per connection the gateway held 16.2-17.1 KB a
// stream before, 15.9-16.3 after, +0.6 to +1.6 KB above the floor
// measured beside it before, +0.3 to +1.1 after; with a connection each
// 35.1-36.1 KB before, 35.1-35.2 after, +1.3 to +3.0 KB above the floor
// before, +1.2 to +2.0 after. What is left above the floor is garbage
// of each stream's opening not yet collected when RSS is read (the heap
// grows to twice what is live before a collection), each stream's first
// message going
// to Kafka through franz-go (records, requests, answers: 9-12 MB of the
// run's allocations), where the floor's echo stores nothing, and per
// connection the gate's state (the gatedConn, its two channels and its
// key: about 0.5 KB).
package gateway
