package depstest

import (
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
)

var secure = sharedKafka{what: "secured kafka"}

// SecureKafka returns the test binary's shared secured broker: a real
// Kafka with SASL_SSL, SASL_PLAINTEXT, SSL and mutual-TLS listeners
// (deps.SecureKafka, in k.Secure) beside its PLAINTEXT one (k.Brokers,
// which Topic and Client use). It is started on first use (~5 s) and
// skips like Kafka(t, deps.KafkaReal).
func SecureKafka(t testing.TB) *deps.Kafka {
	t.Helper()
	skipUnwanted(t, deps.KafkaReal)
	return secure.get(t, Sandbox(t), deps.KafkaConfig{Kind: deps.KafkaReal, Secure: true})
}
