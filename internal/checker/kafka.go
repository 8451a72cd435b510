package checker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaCheckTimeout bounds the check of the checker's own Kafka
// connections at start.
const kafkaCheckTimeout = 10 * time.Second

// secureKafka turns cfg.Kafka into the options of the checker's own Kafka
// clients (cfg.kafkaOpts) and, when it asks for TLS or SASL, checks them
// against cfg.Brokers, so that a wrong password or CA fails the run at
// start with the broker and the mechanism named.
func (c *Config) secureKafka(ctx context.Context) error {
	if len(c.Brokers) == 0 || !c.Kafka.Enabled() {
		return nil
	}
	opts, err := c.Kafka.Opts()
	if err != nil {
		return fmt.Errorf("checker: %w", err)
	}
	if err := c.Kafka.Check(ctx, c.Brokers, kafkaCheckTimeout); err != nil {
		return fmt.Errorf("checker: --brokers: %w", err)
	}
	c.kafkaOpts = opts
	return nil
}

// newKafkaClient returns a client of brokers, secured as secureKafka
// found, with opts.
func newKafkaClient(brokers []string, sec []kgo.Opt, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, sec...), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("checker: kafka client: %w", err)
	}
	return cl, nil
}
