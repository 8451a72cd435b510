package depstest

import (
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
)

// EachKafka runs fn as a subtest, named for the kind, against the shared
// Kafka of every kind (Kafka): one suite for the embedded kfake and the
// real broker.
func EachKafka(t *testing.T, fn func(t *testing.T, k *deps.Kafka)) {
	t.Helper()
	for _, kind := range deps.KafkaKinds {
		t.Run(string(kind), func(t *testing.T) { fn(t, Kafka(t, kind)) })
	}
}
