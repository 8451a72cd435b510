// Package databus is the Go client of the databus gateway (cmd/databus):
// publish to and subscribe from Kafka over long-lived gRPC streams, with
// no Kafka logic in the client.
//
// Publish, waiting for Kafka's ack:
//
//	c, err := databus.Dial("databus:7070")
//	if err != nil { ... }
//	defer c.Close()
//	pub, err := c.NewPublisher(ctx, "orders")
//	if err != nil { ... }
//	defer pub.Close()
//	err = pub.Publish(ctx, databus.Message{Key: []byte("42"), Value: body})
//
// Pipelined, for throughput: PublishAsync returns once the batch is sent
// and calls done when it is answered; up to MaxInflight batches wait at
// once. Aggregation(true) lets the gateway share producers between streams;
// Compression("zstd") asks for the codec of the stream's batches in Kafka.
//
// Subscribe with acks (at-least-once: a batch whose handler fails, or
// that was not acked when the stream ended, is delivered again):
//
//	err = c.Subscribe(ctx, "orders", "billing", func(ctx context.Context, ms []databus.Delivery) error {
//		return process(ms)
//	})
//
// OpenSubscription gives manual control: Recv batches and Ack messages in
// any order; the gateway commits only past offsets that were all acked.
// Close waits (CloseTimeout, 5s) until the gateway read every ack sent
// before it: they are committed, not delivered again.
//
// # Retries and dead letters
//
// A handler's error does not end the stream: Subscribe nacks the batch,
// SubscribeEach (one message at a time, in order) the message, and the
// gateway delivers it again after a delay that grows with its
// DeliveryCount (RetryDelay, 1s doubling to 1m, jittered) while the
// partition's later messages keep coming; the commit never passes it.
// With DeadLetter(n) a message that failed its n-th delivery goes to the
// dead-letter topic ("<topic>.dlq", or DeadLetterTopic; it must exist),
// with headers naming its topic, partition, offset, delivery count, the
// error's text and the group, and its offset then counts as acked:
//
//	err = c.SubscribeEach(ctx, "orders", "billing", func(ctx context.Context, m databus.Delivery) error {
//		return charge(ctx, m) // nil acks; an error nacks: m comes again, m.DeliveryCount one higher
//	}, databus.DeadLetter(5), databus.RetryDelay(time.Second, time.Minute))
//
// With OpenSubscription, Nack(m, delay, reason) does the same by hand. A
// retried message comes after later messages of its partition: per-key
// order does not hold across a retry. Delivery counts are the gateway's
// memory: they start again at 1 when a partition moves to another
// gateway or the gateway restarts, so a message may be delivered more
// than n times before it is dead-lettered, never fewer. A gateway older
// than nacks ignores them: the messages stay unacked and come again only
// when the stream ends.
//
// # Securing the connection
//
// A gateway may require TLS, a client certificate (mutual TLS) and/or a
// bearer token that allows some topics and groups (docs/systems/databus.md,
// "Securing the gateway"). Dial takes them as options:
//
//	c, err := databus.Dial("databus:7070",
//		databus.WithTLSFiles("client.crt", "client.key", "ca.crt"), // or WithTLS(*tls.Config)
//		databus.WithTokenFile("/var/run/secrets/databus/token"))   // or WithToken(token)
//
// A token is sent only over TLS unless WithPlaintextToken says otherwise.
// A stream the gateway refuses fails with Unauthenticated (no token, or an
// unknown one) or PermissionDenied (a topic or group the token does not
// cover), which retrying does not fix: Retryable is false for them.
//
// # Reconnection and guarantees
//
// Gateways restart (a rolling deploy), crash and drain; connections drop.
// The client survives that without help:
//
//   - A Publisher reopens its stream with backoff (WithBackoff, 50ms to
//     5s by default) and resends every batch not yet answered. A batch is
//     answered as published only after Kafka stored every record of it;
//     one in flight when the stream broke is resent and may be stored
//     twice. When the gateway refuses a batch for good (more messages
//     than it accepts: InvalidArgument; more bytes than a stream may
//     have in flight or than gRPC receives: ResourceExhausted; a topic
//     that does not exist: NotFound), that batch fails at once with the
//     error, the others go on, and later publishes succeed once the
//     cause is gone (the topic created). Retryable tells the two kinds
//     of error apart: it is false for these.
//   - Subscribe reconnects by default (Reconnect(false) turns it off and
//     returns the stream's error instead): after a backoff it opens a new
//     stream, and the gateway it reaches joins the group as a new member.
//     Messages delivered and not acked when the stream broke, the batch
//     whose handler was running among them, are delivered again, to this
//     or another member; so are messages acked but not yet committed by a
//     gateway that crashed (it commits acks every second by default).
//     Nothing acked-and-committed is delivered again by the gateway, and
//     nothing is skipped: the gateway never commits past a message that
//     was not acked. After a crash (no goodbye to Kafka) the group waits
//     for the dead member's session to expire, the gateway's
//     --session-timeout (10s by default), before its partitions move on.
//     Subscribe returns only when ctx ends (nil) or on an error retrying
//     cannot fix: NotFound, InvalidArgument, FailedPrecondition,
//     PermissionDenied and the like.
//   - A gateway moves streams off connections older than its
//     --max-connection-age, and off all of them when it stops: it ends
//     them in good order (batches read answered, acks committed) with
//     an error for which Moved is true, and tells the connection to go
//     away. Publisher and Subscribe reopen them at once, on a new
//     connection that the load balancer may send to another gateway;
//     a Publisher resends only batches the gateway never read.
//   - A Subscription from OpenSubscription is one stream: when it breaks,
//     Recv returns the error and the caller opens another. Acks for
//     messages of a broken stream are ignored; those messages are
//     redelivered.
//
// Handlers therefore see each message at least once and must tolerate
// duplicates (make the effect idempotent, or deduplicate by partition and
// offset, or by a key of the message).
//
// Concurrency: a Client is one gRPC (HTTP/2) connection, safe for
// concurrent use. Streams on one connection share it and serialize under
// load, so give each busy publisher or subscriber its own Client, as the
// report that inspired this design learned.
package databus
