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
// once. Aggregation(true) lets the gateway share producers between streams.
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
//
// Concurrency: a Client is one gRPC (HTTP/2) connection, safe for
// concurrent use. Streams on one connection share it and serialize under
// load, so give each busy publisher or subscriber its own Client, as the
// report that inspired this design learned.
package databus
