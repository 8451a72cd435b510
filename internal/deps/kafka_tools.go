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
	version, _, err = kafkaDistFor(version)
	if err != nil {
		return "", false, err
	}
	return cachedLib("kafka-tools-"+version, "kafka-tools-"+version+".jar")
}

// FetchKafkaTools makes sure the jars of Kafka's tools of a version ("" =
// DefaultKafkaVersion) are in the cache, as FetchKafka does the broker's
// (org.apache.kafka:kafka-tools of the same version, with the slf4j
// binding the broker uses), and returns their directory: java -cp
// "<dir>/*" ProducerPerfClass is kafka-producer-perf-test.sh.
func FetchKafkaTools(ctx context.Context, version string, w io.Writer) (string, error) {
	version, dist, err := kafkaDistFor(version)
	if err != nil {
		return "", err
	}
	lib, cached, err := KafkaToolsLibDir(version)
	if err != nil || cached {
		return lib, err
	}
	return fetchJars(ctx, jarSet{
		what: "kafka tools " + version, lib: lib,
		artifact: "kafka-tools-jars", version: version,
		jars:   []mavenJar{{"org.apache.kafka", "kafka-tools", version}, dist.logging},
		marker: "kafka-tools-" + version + ".jar", noMaven: ErrMavenNotInstalled,
	}, w)
}
