package depsctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/kafkatopic"
)

// EnsureTopics creates those of topics that do not exist on the Kafka
// at brokers (host:port,...), with partitions partitions each (0: the
// broker's default) and the broker's default replication factor (3 on
// kafka-cluster), and waits until all are in its
// metadata. Topics that exist are left as they are, so a second "up
// --topics" changes nothing. Neither kfake nor the real broker creates a
// topic on first use.
func EnsureTopics(ctx context.Context, brokers string, partitions int, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	for _, t := range topics {
		if t == "" || strings.ContainsAny(t, " ,") {
			return fmt.Errorf("depsctl: topic %q: give names separated by commas, as --topics orders,payments", t)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return fmt.Errorf("depsctl: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	existing, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("depsctl: list the topics of %s: %w", brokers, err)
	}
	var missing []string
	for _, t := range topics {
		if !existing.Has(t) && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		if partitions <= 0 {
			partitions = -1 // the broker's num.partitions
		}
		if err := kafkatopic.Create(ctx, adm, partitions, missing...); err != nil {
			return fmt.Errorf("depsctl: %w", err)
		}
	}
	if err := kafkatopic.Await(ctx, adm, topics...); err != nil {
		return fmt.Errorf("depsctl: %w", err)
	}
	return nil
}
