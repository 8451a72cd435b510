package deps

import (
	"context"
	"io"
)

// ProducerPerfClass is the main class of Kafka's kafka-producer-perf-test.sh
// (bin/kafka-run-class.sh runs it with the distribution's jars): Kafka's
// own producer benchmark, in the kafka-tools jar.
const ProducerPerfClass = "org.apache.kafka.tools.ProducerPerformance"

// KafkaToolsLibDir returns the directory holding the jars of Kafka's
// command-line tools of a version (<CacheDir>/kafka-tools-<version>/lib;
// "" = DefaultKafkaVersion) and whether they are all there. The broker's
// jars (KafkaLibDir) do not include them: Maven Central's kafka_2.13 does
// not depend on kafka-tools.
func KafkaToolsLibDir(version string) (dir string, cached bool, err error) {
	return toolsJars.libDir(version)
}

var toolsJars = kafkaJars{what: "kafka tools", dir: "kafka-tools", artifact: "kafka-tools", pom: "kafka-tools-jars"}

// FetchKafkaTools makes sure the jars of Kafka's tools of a version ("" =
// DefaultKafkaVersion) are in the cache, as FetchKafka does the broker's
// (org.apache.kafka:kafka-tools of the same version, with the slf4j
// binding the broker uses), and returns their directory: java -cp
// "<dir>/*" ProducerPerfClass is kafka-producer-perf-test.sh.
func FetchKafkaTools(ctx context.Context, version string, w io.Writer) (string, error) {
	return toolsJars.fetch(ctx, version, w)
}
