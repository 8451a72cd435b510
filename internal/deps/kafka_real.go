package deps

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// kafkaProps is a single combined KRaft node on 127.0.0.1. Replication
// factors are 1 because there is one node. Internal topics get 10
// partitions instead of 50: with one broker their count spreads no load,
// and fewer make the first consumer group and each restart faster.
// Topics are never created on first use, so an unknown topic is an error
// the caller sees (the gateway maps it to NotFound).
var kafkaProps = template.Must(template.New("server.properties").Parse(`# Written by hlab: a single-node KRaft Kafka {{.Version}} (broker and controller in one).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{{.ControllerPort}}
listeners=PLAINTEXT://127.0.0.1:{{.Port}},CONTROLLER://127.0.0.1:{{.ControllerPort}}{{.Secure.Listeners}}
advertised.listeners=PLAINTEXT://127.0.0.1:{{.Port}}{{.Secure.Listeners}}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{{.Secure.Protocols}}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs={{.Dir}}/data
num.partitions={{.Partitions}}
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
{{- if .Share}}
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
{{- end}}
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
{{- with .Secure.Extra}}
{{.}}
{{- end}}
`))

// kafkaPropsData fills kafkaProps.
type kafkaPropsData struct {
	Version              string
	Port, ControllerPort int
	Dir                  string
	Partitions           int
	Share                bool
	Secure               kafkaSecureProps // KafkaConfig.Secure's listeners (kafka_secure.go)
}

// RenderKafkaProps returns the server.properties of a single-node KRaft
// broker of version ("" = DefaultKafkaVersion) on 127.0.0.1:port with its
// controller on controllerPort, keeping its data in dir/data.
func RenderKafkaProps(version string, port, controllerPort int, dir string, partitions int) ([]byte, error) {
	return renderKafkaProps(version, port, controllerPort, dir, partitions, kafkaSecureProps{})
}

func renderKafkaProps(version string, port, controllerPort int, dir string, partitions int, sec kafkaSecureProps) ([]byte, error) {
	version, dist, err := kafkaDistFor(version)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&partitions, DefaultKafkaPartitions)
	var buf bytes.Buffer
	err = kafkaProps.Execute(&buf, kafkaPropsData{version, port, controllerPort, dir, partitions, dist.shareConf, sec})
	return buf.Bytes(), err
}

// kafkaUUID returns a random Kafka cluster id as kafka-storage random-uuid
// prints it (16 random bytes, URL-safe base64 without padding, never
// starting with '-'), without starting a JVM for it.
func kafkaUUID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		if s := base64.RawURLEncoding.EncodeToString(b[:]); s[0] != '-' {
			return s
		}
	}
}

const kafkaTempPrefix = "hlab-kafka-"

// realBroker is the JVM behind a real Kafka, with what it takes to start
// it again after StopBroker.
type realBroker struct {
	*serverNode
	brokers []string
	keep    bool // Stop leaves the storage in a given Dir
}

// startReal fetches the jars if needed, formats the storage of a new
// single-node cluster and starts the broker.
func startReal(ctx context.Context, sb *sandbox.Sandbox, cfg KafkaConfig) (*Kafka, error) {
	version, dist, err := kafkaDistFor(cfg.Version)
	if err != nil {
		return nil, err
	}
	java, javaVersion, err := FindJava()
	if err != nil {
		return nil, err
	}
	if err := checkJava(javaVersion, dist.minJava, "kafka "+version); err != nil {
		return nil, err
	}
	lib, err := FetchKafka(ctx, version, cfg.Log)
	if err != nil {
		return nil, err
	}

	// SIGTERM is a controlled shutdown: a few seconds for a single node.
	// A new cluster id needs empty storage; a previous run's is stale.
	node, err := newServerNode(ctx, sb, "kafka", cfg.Dir, kafkaTempPrefix, []string{"data"}, cfg.Keep, 15*time.Second, ErrKafkaStopped)
	if err != nil {
		return nil, err
	}
	r := &realBroker{serverNode: node, keep: cfg.Keep}
	node.log = "server.log"
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		return awaitKafka(ctx, r.brokers, cfg.StartTimeout, exited)
	}
	ok := false
	defer func() {
		if !ok {
			r.removeDir()
		}
	}()

	logConfPath, err := r.writeConf(dist.logFile, dist.logConf, r.dir)
	if err != nil {
		return nil, err
	}
	heap := cfg.heap(512)
	propsPath := filepath.Join(r.dir, "server.properties")
	classpath := filepath.Join(lib, "*") // the JVM expands a trailing * to every jar
	jvm := []string{
		"-Xmx" + strconv.Itoa(heap) + "m",
		// What kafka-server-start.sh runs with (KAFKA_JVM_PERFORMANCE_OPTS).
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		dist.logFlag + logConfPath,
		"-cp", classpath,
	}
	r.spec = sandbox.Spec{
		Name: "kafka", Path: java, Dir: r.dir,
		Args: append(jvm, "kafka.Kafka", propsPath),
		CPU:  cfg.CPU, MemoryMB: cfg.MemoryMB,
	}

	var sec *kafkaSecure
	if cfg.Secure {
		if sec, err = newKafkaSecure(r.dir); err != nil {
			return nil, err
		}
	}
	var secure *SecureKafka
	formatted := false
	err = onPorts(ctx, cfg.Port, 2+sec.ports(), func(ports []int) error {
		port, cport := ports[0], ports[1]
		props, err := renderKafkaProps(version, port, cport, r.dir, cfg.Partitions, sec.props(ports[2:]))
		if err != nil {
			return err
		}
		// 0600: a secured broker's file holds its PLAIN users' passwords.
		if err := os.WriteFile(propsPath, props, 0o600); err != nil {
			return fmt.Errorf("deps: kafka config: %w", err)
		}
		if !formatted && cfg.Keep && fileExists(filepath.Join(r.dir, "data", "meta.properties")) {
			formatted = true // a previous run's storage, kept
		}
		if !formatted {
			// Formatting does not depend on the ports: once is enough.
			if err := r.format(ctx, java, classpath, dist.logFlag+logConfPath, propsPath, sec.formatArgs()...); err != nil {
				return err
			}
			formatted = true
		}
		r.brokers = []string{fmt.Sprintf("127.0.0.1:%d", port)}
		secure = sec.describe(ports[2:])
		return r.startServer(ctx)
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return &Kafka{
		Kind: "kafka " + version, Version: version,
		Brokers: r.brokers, Dir: r.dir,
		Secure:     secure,
		partitions: cfg.Partitions,
		real:       r,
	}, nil
}

// format writes the storage of a new cluster (meta.properties and the
// bootstrap metadata) into the data directory: kafka-storage format.
// extra adds to its arguments (the SCRAM users of a secured broker).
func (r *realBroker) format(ctx context.Context, java, classpath, logFlag, propsPath string, extra ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A one-shot tool: C1 alone starts it faster (~0.7 s instead of ~1.2 s).
	args := append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", logFlag, "-cp", classpath,
		"kafka.tools.StorageTool", "format", "-t", kafkaUUID(), "-c", propsPath}, extra...)
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	os.WriteFile(filepath.Join(r.dir, "format.log"), out, 0o644)
	if err != nil {
		return fmt.Errorf("deps: kafka storage format failed: %w: %s", err, lastLines(string(out), 5))
	}
	return nil
}

// fileSize returns the size of path, 0 when it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logsSince describes what went wrong from the log lines written since
// the offsets in from: the last ERROR/FATAL lines (a broker that fails to
// start says why there, often followed by a long shutdown), else the last
// lines.
func logsSince(from map[string]int64, paths ...string) string {
	var parts []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		f.Seek(from[p], io.SeekStart)
		b, _ := io.ReadAll(f)
		f.Close()
		var errs []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "] ERROR ") || strings.Contains(l, "] FATAL ") || strings.HasPrefix(l, "Error") || strings.HasPrefix(l, "Exception") {
				errs = append(errs, l)
			}
		}
		text := lastLines(string(b), 5)
		if len(errs) > 0 {
			text = lastLines(strings.Join(errs, "\n"), 3)
		}
		if text != "" {
			parts = append(parts, p+": "+text)
		}
	}
	if len(parts) == 0 {
		return "the broker logged nothing (" + strings.Join(paths, ", ") + ")"
	}
	return strings.Join(parts, "; ")
}

// stopBroker stops the JVM, keeping its directory for startBroker.
func (r *realBroker) stopBroker() error { return r.stopServer() }

func (r *realBroker) startBroker(ctx context.Context) error { return r.startServer(ctx) }

func (r *realBroker) stop() error {
	return r.serverNode.stop(func() {
		if r.ownDir {
			r.removeDir()
		} else if !r.keep {
			r.removeStorage()
		}
	})
}
