package depstest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
)

var secure sharedKafka

// SecureKafka returns the test binary's shared secured broker: a real
// Kafka with SASL_SSL, SASL_PLAINTEXT, SSL and mutual-TLS listeners
// (deps.SecureKafka, in k.Secure) beside its PLAINTEXT one (k.Brokers,
// which Topic and Client use). It is started on first use (~5 s) and
// skips like Kafka(t, deps.KafkaReal).
func SecureKafka(t testing.TB) *deps.Kafka {
	t.Helper()
	skipUnwanted(t, deps.KafkaReal)
	box := Sandbox(t)
	secure.once.Do(func() {
		start := time.Now()
		secure.k, secure.err = deps.StartKafka(context.Background(), box, deps.KafkaConfig{
			Kind: deps.KafkaReal, Secure: true, Version: os.Getenv("HLAB_TEST_KAFKA_VERSION"),
		})
		if secure.err == nil {
			t.Logf("depstest: started the shared secured %s in %s: %+v", secure.k.Kind, time.Since(start).Round(time.Millisecond), *secure.k.Secure)
		}
	})
	if secure.err != nil {
		t.Fatalf("depstest: the shared secured kafka did not start (later tests get the same error): %v", secure.err)
	}
	return secure.k
}
