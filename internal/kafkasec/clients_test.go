package kafkasec_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/testcerts"
)

// TestCheckerOnSecuredKafka runs the checker against a gateway in front
// of the secured broker, both over SCRAM-SHA-512 and TLS: the checker
// creates its topic and produces straight to Kafka (--direct) with its
// own --kafka-* settings, a group reads everything back through the
// gateway, nothing is lost. With a wrong password the run fails at start,
// naming the broker and the mechanism.
func TestCheckerOnSecuredKafka(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	sec := kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.ScramSHA512, User: s.User, PasswordFile: s.PasswordFile}
	opts, err := sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Brokers: []string{s.SASLSSL}, KafkaOpts: opts}, gateway.ServerOptions{})
	cfg := checker.Config{
		Target: addr, Brokers: []string{s.SASLSSL}, Kafka: sec,
		Topic: depstest.Name(t), Partitions: 2,
		Scenario: checker.Throughput, Direct: true, Streams: 2,
		Warmup: -1, Duration: time.Second, Groups: 1, DrainTimeout: 30 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := checker.Run(ctx, cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Acked == 0 || res.Delivery == nil || res.Delivery.Lost != 0 {
		t.Fatalf("acked %d, delivery %+v, errors %v", res.Acked, res.Delivery, res.Errors)
	}

	cfg.Kafka.PasswordFile = testcerts.WriteFile(t, t.TempDir(), "wrong", "wrong-password\n")
	_, err = checker.Run(ctx, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), s.SASLSSL) || !strings.Contains(err.Error(), "SCRAM-SHA-512 over TLS") {
		t.Fatalf("a wrong password: got %v, want a refusal naming %s and SCRAM-SHA-512 over TLS", err, s.SASLSSL)
	}
}
