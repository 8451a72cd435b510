package depsctl

import (
	"fmt"
	"strings"

	"github.com/highload-lab/hlab/internal/deps"
)

// Dep is a dependency Up can start.
type Dep struct {
	Name string // as given: "postgres", "kafka-real", "kafka@4.3.1"
	// What says what runs, for help and ps.
	What string
	// Prints is what the connection string looks like.
	Prints string
	// Keeps says whether its data outlives down (on disk), or dies with
	// it (in memory: kfake, Redis without persistence, the mongo
	// stand-in; nginx has none).
	Keeps bool

	kind         string // postgres, kfake, kafka-real, kafka-cluster, cassandra, redis, mongo, prometheus, nginx
	kafkaVersion string // kafka-real: "" = deps.DefaultKafkaVersion
}

// Deps lists the names Up knows, in the order help shows them.
var Deps = []Dep{
	{Keeps: true, Name: "postgres", kind: "postgres", What: "PostgreSQL (durable: fsync on), data kept across down and up", Prints: "postgres://postgres:PASSWORD@127.0.0.1:PORT/postgres?sslmode=disable"},
	{Name: "kafka", kind: "kfake", What: "kfake, franz-go's embedded fake Kafka (in memory: down loses the topics)", Prints: "127.0.0.1:PORT (the broker list)"},
	{Keeps: true, Name: "kafka-real", kind: "kafka-real", What: "Apache Kafka " + deps.DefaultKafkaVersion + ", a single KRaft node on Java, data kept", Prints: "127.0.0.1:PORT (the broker list)"},
	{Keeps: true, Name: "kafka-secure", kind: "kafka-secure", What: "kafka-real with SASL_SSL, SASL_PLAINTEXT, SSL and mutual-TLS listeners beside its PLAINTEXT one; a CA, a SCRAM/PLAIN user, an OAUTHBEARER test token", Prints: "127.0.0.1:PORT (the PLAINTEXT listener, for admin tools); the secured ones and the files: STATE_DIR/" + SecureEnvFile},
	{Keeps: true, Name: "kafka-cluster", kind: "kafka-cluster", What: fmt.Sprintf("Apache Kafka %s, %d brokers (replication 3, min.insync.replicas 2) and a KRaft controller on Java, data kept", deps.DefaultKafkaVersion, deps.ClusterNodes), Prints: "127.0.0.1:PORT,127.0.0.1:PORT,127.0.0.1:PORT (the broker list)"},
	{Keeps: true, Name: "cassandra", kind: "cassandra", What: deps.CassandraKind + ", a single node on Java, data kept", Prints: "127.0.0.1:PORT (CQL)"},
	{Name: "redis", kind: "redis", What: "redis-server, no persistence (a cache, as the reports ran it)", Prints: "redis://127.0.0.1:PORT"},
	{Name: "mongo", kind: "mongo", What: "a stand-in, not MongoDB: mongo-java-server " + deps.MongoStandInVersion + ", in memory", Prints: "mongodb://127.0.0.1:PORT/?directConnection=true"},
	{Keeps: true, Name: "prometheus", kind: "prometheus", What: "Prometheus (Debian's package) with deploy/grafana's prometheus.yml and alert rules: every 15 s it scrapes the task API's admin address 127.0.0.1:6060, the databus gateway's 127.0.0.1:7071, catalog's 127.0.0.1:8081 and pricing's 127.0.0.1:8082; samples kept 15 days", Prints: "http://127.0.0.1:PORT (its UI and HTTP API: Grafana's data source URL)"},
	{Name: "nginx", kind: "nginx", What: "nginx, round robin over --upstream HOST:PORT,...; none: it answers 200", Prints: "http://127.0.0.1:PORT"},
}

// Parse returns the dependency named name: one of Deps, or kafka@VERSION
// (the real broker of that version).
func Parse(name string) (Dep, error) {
	for _, d := range Deps {
		if d.Name == name {
			return d, nil
		}
	}
	if v, ok := strings.CutPrefix(name, "kafka@"); ok && v != "" {
		if _, err := deps.CheckKafka(v); err != nil {
			return Dep{}, fmt.Errorf("%w %q (%v): use one of %s, or kafka@VERSION", ErrUnknownName, name, err, strings.Join(Names(), ", "))
		}
		d := Deps[2]
		d.Name, d.kafkaVersion = name, v
		d.What = "Apache Kafka " + v + ", a single KRaft node on Java, data kept"
		return d, nil
	}
	return Dep{}, fmt.Errorf("%w %q: use one of %s, or kafka@VERSION", ErrUnknownName, name, strings.Join(Names(), ", "))
}

// Names returns the names of Deps.
func Names() []string {
	out := make([]string, len(Deps))
	for i, d := range Deps {
		out[i] = d.Name
	}
	return out
}

// Kafka reports whether d is a Kafka (kfake or the real broker), whose
// topics up --topics creates.
func (d Dep) Kafka() bool {
	return d.kind == "kfake" || d.kind == "kafka-real" || d.kind == "kafka-secure" || d.kind == "kafka-cluster"
}
