package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestReusedBatchesKeepEachRecord publishes batches of different sizes
// on streams with many batches in flight (one of them through the shared
// producer of aggregation), so that the gateway reuses a batch's request
// structs, bytes and records (batchpool.go) while Kafka still
// answers others, then reads every record straight from Kafka: each must
// hold its own key, value and header. A batch reused before Kafka
// answered all of its records shows as records with another's contents
// (and, under -race, as a race with franz-go). Every fifth message has
// neither key nor value, after messages that had both on the same
// pooled structs: Kafka must store them as null, as a fresh message
// would be (a null key spreads over partitions; a null value is a
// tombstone).
func TestReusedBatchesKeepEachRecord(t *testing.T) {
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := newTopic(t, k, 4)
		w := startGateway(t, gateway.Config{Brokers: k.Brokers})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const streams, batches = 3, 30
		want := map[string]databus.Message{} // by the "id" header
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, streams*batches)
		for s := range streams {
			// The last stream's records go through the shared producer.
			pub, err := w.client(t).NewPublisher(ctx, topic, databus.MaxInflight(16), databus.Aggregation(s == streams-1))
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			for b := range batches {
				batch := make([]databus.Message, 1+(b*7+s)%60)
				for i := range batch {
					id := fmt.Sprintf("%d-%d-%d", s, b, i)
					m := databus.Message{Headers: []databus.Header{{Key: "id", Value: []byte(id)}}}
					if (i+b)%5 != 4 { // a keyless message on a slot that had a key before
						m.Key = []byte("key-" + id)
						m.Value = bytes.Repeat([]byte(id+";"), 1+i%4)
					}
					batch[i] = m
					mu.Lock()
					want[id] = m
					mu.Unlock()
				}
				wg.Add(1)
				if err := pub.PublishAsync(ctx, batch, func(err error) {
					errs <- err
					wg.Done()
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}

		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got := map[string]*kgo.Record{} // by the "id" header, as stored
		read := 0
		testkit.EventuallyNil(t, 30*time.Second, "every record read back", func() error {
			fctx, fcancel := context.WithTimeout(ctx, time.Second)
			defer fcancel()
			cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
				read++
				if len(r.Headers) == 1 && r.Headers[0].Key == "id" {
					got[string(r.Headers[0].Value)] = r
				}
			})
			if read < len(want) {
				return fmt.Errorf("%d of %d", read, len(want))
			}
			return nil
		})
		bad := 0
		for id, m := range want {
			r := got[id]
			if r == nil || !bytes.Equal(r.Key, m.Key) || !bytes.Equal(r.Value, m.Value) || (m.Key == nil) != (r.Key == nil) || (m.Value == nil) != (r.Value == nil) {
				if bad++; bad <= 5 {
					t.Errorf("message %s stored as %s, want %s", id, describe(r), keyValue(m.Key, m.Value))
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%d of %d records hold other contents than were sent", bad, len(want))
		}
	})
}

func describe(r *kgo.Record) string {
	if r == nil {
		return "nothing"
	}
	return keyValue(r.Key, r.Value)
}

func keyValue(k, v []byte) string {
	q := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return strconv.Quote(string(b))
	}
	return "key " + q(k) + " value " + q(v)
}
