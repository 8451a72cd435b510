// Command databus is the databus quickstart's Go client (README,
// "Quickstart: the databus gateway"): it publishes a few messages to a
// topic through a gateway, waits for Kafka to store them, then consumes
// them as a consumer group and acks them.
//
//	go run ./examples/databus --gateway 127.0.0.1:7070 --topic orders
//
// A new group starts at the topic's first message, so a second run reads
// the first run's messages too; --group names another group to read from
// the start again.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/highload-lab/hlab/databus"
)

func main() {
	gateway := flag.String("gateway", "127.0.0.1:7070", "the gateway's gRPC address (hlab serve databus --grpc-addr)")
	topic := flag.String("topic", "orders", "the Kafka topic; it must exist (hlab deps up kafka --topics orders)")
	group := flag.String("group", "quickstart", "the consumer group to read as")
	n := flag.Int("n", 3, "messages to publish, then to read")
	flag.Parse()
	if err := run(*gateway, *topic, *group, *n); err != nil {
		log.SetFlags(0)
		log.Fatalf("databus quickstart: %v", err)
	}
}

func run(gateway, topic, group string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := databus.Dial(gateway)
	if err != nil {
		return err
	}
	defer c.Close()

	pub, err := c.NewPublisher(ctx, topic)
	if err != nil {
		return err
	}
	defer pub.Close()
	batch := make([]databus.Message, n)
	for i := range batch {
		batch[i] = databus.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "hello %d", i)}
	}
	// Publish returns once Kafka stored every message, or says which not.
	if err := pub.Publish(ctx, batch...); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	fmt.Printf("published %d messages to %s\n", n, topic)

	// Subscribe calls the handler with batches; returning nil acks them.
	// It returns when ctx ends: here, once n messages were read.
	read := 0
	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	err = c.Subscribe(subCtx, topic, group, func(_ context.Context, ms []databus.Delivery) error {
		for _, m := range ms {
			fmt.Printf("consumed %s/%d@%d key=%s value=%q\n", m.Topic, m.Partition, m.Offset, m.Key, m.Value)
		}
		if read += len(ms); read >= n {
			stop()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if read < n {
		return fmt.Errorf("read %d of %d messages before the deadline: %w", read, n, ctx.Err())
	}
	fmt.Fprintf(os.Stderr, "read %d messages as group %s\n", read, group)
	return nil
}
