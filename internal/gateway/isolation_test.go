package gateway_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/testkit"
)

// Subscribers get only what transactions committed (read_committed, the
// default); read_uncommitted delivers what they aborted too.
func TestTransactionsIsolation(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaReal)
	topic := newTopic(t, k, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tx := depstest.Client(t, k, kgo.TransactionalID("tx-"+topic), kgo.DefaultProduceTopic(topic))
	for _, commit := range []bool{false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		what := map[bool]string{false: "aborted", true: "committed"}[commit]
		for i := range 10 {
			r := &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", what, i), Value: []byte("v")}
			if err := tx.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	for _, tt := range []struct {
		level          string
		aborted, acked int
	}{
		{"", 0, 10}, // the default: read_committed
		{gateway.IsolationReadUncommitted, 10, 20},
	} {
		t.Run(cmp.Or(tt.level, "default"), func(t *testing.T) {
			w := startGateway(t, gateway.Config{Brokers: k.Brokers, IsolationLevel: tt.level})
			var acks keys
			sctx, scancel := context.WithCancel(ctx)
			defer scancel()
			go w.client(t).Subscribe(sctx, topic, depstest.Group(t), func(_ context.Context, ds []databus.Delivery) error {
				acks.add(ds...)
				return nil
			})
			// The committed records follow the aborted ones in the one
			// partition: once they are all in, every aborted record that
			// was to come came.
			count := func() (aborted, committed, dups int) {
				acks.mu.Lock()
				defer acks.mu.Unlock()
				for key, n := range acks.m {
					if strings.HasPrefix(key, "aborted-") {
						aborted++
					} else {
						committed++
					}
					dups += n - 1
				}
				return
			}
			testkit.EventuallyNil(t, 30*time.Second, "the committed records delivered", func() error {
				if _, c, _ := count(); c < 10 {
					return fmt.Errorf("%d of 10", c)
				}
				return nil
			})
			aborted, committed, dups := count()
			t.Logf("isolation %q: %d aborted and %d committed records delivered, %d duplicates", tt.level, aborted, committed, dups)
			if aborted != tt.aborted || aborted+committed != tt.acked || dups != 0 {
				t.Errorf("want %d aborted, %d in all, no duplicates", tt.aborted, tt.acked)
			}
		})
	}
}
