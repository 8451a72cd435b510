package deps

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// kafkaProps is one KRaft node on 127.0.0.1: the single node, broker
// and controller in one process; or a node of a cluster, whose brokers
// and controller run apart, as Kafka recommends outside development, so
// that brokers crash without taking the controller quorum with them: two
// brokers of three gone leave a controller that shrinks the in-sync
// replica sets, and the survivor refuses writes with NOT_ENOUGH_REPLICAS
// rather than waiting on its dead followers.
//
// A single node has replication factors of 1. A cluster replicates every
// topic, the internal ones included, Replication times (3), and takes a
// write with acks=all only when MinISR replicas (2) have it; a replica
// that was out of sync never becomes leader (no unclean election), so a
// crash loses nothing that was acknowledged. Its controller declares a
// crashed broker dead after 3 s without a heartbeat rather than Kafka's
// default 9 s, and moves its partitions' leadership then: on loopback
// there are no network hiccups to ride out, and each fault test waits out
// every failover.
//
// Internal topics get 10 partitions instead of 50: on loopback their
// count spreads no load, and fewer make the first consumer group and each
// restart faster. Topics are never created on first use, so an unknown
// topic is an error the caller sees (the gateway maps it to NotFound).
var kafkaProps = template.Must(template.New("server.properties").Parse(`# Written by hlab: {{.What}}.
process.roles={{.Roles}}
node.id={{.NodeID}}
controller.quorum.voters={{.Voters}}
{{- if .Broker}}
listeners=PLAINTEXT://127.0.0.1:{{.Port}}{{if .Controller}},CONTROLLER://127.0.0.1:{{.ControllerPort}}{{end}}{{.Secure.Listeners}}
advertised.listeners=PLAINTEXT://127.0.0.1:{{.Port}}{{.Secure.Listeners}}
inter.broker.listener.name=PLAINTEXT
{{- else}}
listeners=CONTROLLER://127.0.0.1:{{.ControllerPort}}
{{- end}}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{{.Secure.Protocols}}
controller.listener.names=CONTROLLER
log.dirs={{.Dir}}/data
num.partitions={{.Partitions}}
default.replication.factor={{.Replication}}
min.insync.replicas={{.MinISR}}
unclean.leader.election.enable=false
offsets.topic.replication.factor={{.Replication}}
offsets.topic.num.partitions=10
transaction.state.log.replication.factor={{.Replication}}
transaction.state.log.min.isr={{.MinISR}}
transaction.state.log.num.partitions=10
{{- if .Share}}
share.coordinator.state.topic.replication.factor={{.Replication}}
share.coordinator.state.topic.min.isr={{.MinISR}}
{{- end}}
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
{{- if gt .Brokers 1}}
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
{{- end}}
{{- with .Secure.Extra}}
{{.}}
{{- end}}
`))

// kafkaPropsData fills kafkaProps.
type kafkaPropsData struct {
	What string // the header's description of the node
	// Roles is process.roles; Broker and Controller say what it holds.
	Roles               string
	Broker, Controller  bool
	Brokers             int // the cluster's broker count
	NodeID              int
	Port                int    // the broker's client port
	ControllerPort      int    // the controller's, when the node is one
	Voters              string // controller.quorum.voters: id@127.0.0.1:port
	Dir                 string
	Partitions          int
	Replication, MinISR int
	Share               bool
	Secure              kafkaSecureProps // KafkaConfig.Secure's listeners (kafka_secure.go)
}

// RenderKafkaProps returns the server.properties of a single-node KRaft
// broker of version ("" = DefaultKafkaVersion) on 127.0.0.1:port with its
// controller on controllerPort, keeping its data in dir/data.
func RenderKafkaProps(version string, port, controllerPort int, dir string, partitions int) ([]byte, error) {
	single := kafkaLayout{brokers: []int{port}, controllerPort: controllerPort}
	return single.render(version, 1, dir, partitions)
}

// kafkaLayout is where a real Kafka's nodes listen: one broker, which is
// also the controller, or brokers with node.id 1..n and a controller of
// their own with node.id n+1.
type kafkaLayout struct {
	brokers        []int // client ports, by node.id-1
	controllerPort int
	secure         kafkaSecureProps // a single node's secured listeners
}

// controllerID is the controller's node.id.
func (l kafkaLayout) controllerID() int {
	if len(l.brokers) == 1 {
		return 1
	}
	return len(l.brokers) + 1
}

// render returns the server.properties of node id (a broker's, or the
// controller's) with its data in dir/data.
func (l kafkaLayout) render(version string, id int, dir string, partitions int) ([]byte, error) {
	version, dist, err := kafkaDistFor(version)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&partitions, DefaultKafkaPartitions)
	n := len(l.brokers)
	replication := min(n, 3)
	d := kafkaPropsData{
		Brokers: n, NodeID: id,
		ControllerPort: l.controllerPort,
		Voters:         fmt.Sprintf("%d@127.0.0.1:%d", l.controllerID(), l.controllerPort),
		Dir:            dir, Partitions: partitions,
		Replication: replication, MinISR: max(1, replication-1),
		Share: dist.shareConf, Secure: l.secure,
	}
	switch {
	case n == 1:
		d.What, d.Roles, d.Broker, d.Controller, d.Port = "a single-node KRaft Kafka "+version+" (broker and controller in one)", "broker,controller", true, true, l.brokers[0]
	case id == l.controllerID():
		d.What, d.Roles, d.Controller = fmt.Sprintf("the KRaft controller of a %d-broker Kafka %s", n, version), "controller", true
	default:
		d.What, d.Roles, d.Broker, d.Port = fmt.Sprintf("broker %d of a %d-broker KRaft Kafka %s", id, n, version), "broker", true, l.brokers[id-1]
	}
	var buf bytes.Buffer
	err = kafkaProps.Execute(&buf, d)
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

// realBroker is the JVM of one node of a real Kafka, with what it takes
// to start it again after a stop or a kill.
type realBroker struct {
	*serverNode
	id             int      // node.id: brokers 1..n, a cluster's controller n+1
	controllerOnly bool     // a cluster's controller, no broker
	brokers        []string // its own address (a controller's: its listener)
	keep           bool     // Stop leaves the storage in a given Dir
}

// startReal fetches the jars if needed, formats the storage of a new
// cluster of cfg.Nodes brokers (one when 0, which is also the controller;
// else with a controller of their own) and starts every node.
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
	n := max(cfg.Nodes, 1)

	// A single node lives in cfg.Dir; a cluster's brokers and controller
	// in node-ID subdirectories of it.
	top, ownTop := cfg.Dir, false
	if n > 1 {
		if top, ownTop, err = depDir("kafka", cfg.Dir, kafkaTempPrefix); err != nil {
			return nil, err
		}
	}
	var nodes []*realBroker // the brokers, then a cluster's controller
	ok := false
	defer func() {
		if !ok {
			for _, r := range nodes {
				r.removeDir()
			}
			if ownTop {
				os.RemoveAll(top)
			}
		}
	}()
	jars := kafkaJVM{java: java, classpath: filepath.Join(lib, "*"), dist: dist}
	ids := n
	if n > 1 {
		ids++ // the controller
	}
	for id := 1; id <= ids; id++ {
		dir := cfg.Dir
		if n > 1 {
			dir = filepath.Join(top, fmt.Sprintf("node-%d", id))
		}
		r, err := newRealBroker(ctx, sb, cfg, id, id > n, dir, jars)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, r)
	}

	var sec *kafkaSecure
	if cfg.Secure {
		if n > 1 {
			return nil, errors.New("deps: a secured Kafka is a single broker: start it without Nodes, or the cluster without Secure")
		}
		if sec, err = newKafkaSecure(nodes[0].dir); err != nil {
			return nil, err
		}
	}
	var secure *SecureKafka
	formatted := false
	clusterID := kafkaUUID() // every node's storage names the same cluster
	// The brokers' client ports (the first one fixed by cfg.Port), then
	// the controller's. A kept cluster comes back on the ports it had,
	// so that its broker list stays the same string.
	start := func(ports []int) error {
		layout := kafkaLayout{brokers: ports[:n], controllerPort: ports[n], secure: sec.props(ports[n+1:])}
		for _, r := range nodes {
			props, err := layout.render(version, r.id, r.dir, cfg.Partitions)
			if err != nil {
				return err
			}
			// 0600: a secured broker's file holds its PLAIN users' passwords.
			if err := os.WriteFile(r.propsPath(), props, 0o600); err != nil {
				return fmt.Errorf("deps: kafka config: %w", err)
			}
			if r.controllerOnly {
				r.brokers = []string{fmt.Sprintf("127.0.0.1:%d", layout.controllerPort)}
			} else {
				r.brokers = []string{fmt.Sprintf("127.0.0.1:%d", layout.brokers[r.id-1])}
			}
		}
		if !formatted && cfg.Keep && nodes[0].formatted() {
			formatted = true // a previous run's storage, kept
		}
		if !formatted {
			// Formatting does not depend on the ports: once is enough.
			if err := eachNode(nodes, func(r *realBroker) error { return r.format(ctx, jars, clusterID, sec.formatArgs()...) }); err != nil {
				return err
			}
			formatted = true
		}
		secure = sec.describe(ports[n+1:])
		// Together: a broker is ready only once the controller runs.
		err := eachNode(nodes, func(r *realBroker) error { return r.startServer(ctx) })
		if err != nil {
			for _, r := range nodes {
				r.killServer()
			}
		}
		return err
	}
	if kept := keptPorts(nodes); n > 1 && cfg.Keep && kept != nil {
		err = start(kept)
	} else {
		err = onPorts(ctx, cfg.Port, n+1+sec.ports(), start)
	}
	if err != nil {
		return nil, err
	}
	ok = true
	k := &Kafka{
		Kind: "kafka " + version, Version: version,
		Dir:        top,
		Secure:     secure,
		partitions: cfg.Partitions,
		nodes:      nodes[:n],
		ownDir:     ownTop,
	}
	if n > 1 {
		k.controller = nodes[n]
		replication := min(n, 3)
		k.Kind = fmt.Sprintf("kafka %s (%d brokers and a KRaft controller, replication %d, min.insync.replicas %d)", version, n, replication, max(1, replication-1))
	}
	for _, r := range k.nodes {
		k.Brokers = append(k.Brokers, r.brokers...)
	}
	return k, nil
}

// kafkaJVM is how a Kafka's JVMs start: java, the jars, and what differs
// between versions.
type kafkaJVM struct {
	java, classpath string
	dist            kafkaDist
}

// newRealBroker prepares node id, a broker or a cluster's controller
// (controllerOnly), in dir ("" = a temporary directory): its log
// configuration and its command line.
func newRealBroker(ctx context.Context, sb *sandbox.Sandbox, cfg KafkaConfig, id int, controllerOnly bool, dir string, jars kafkaJVM) (*realBroker, error) {
	// SIGTERM is a controlled shutdown: a few seconds for a single node.
	// A new cluster id needs empty storage; a previous run's is stale.
	node, err := newServerNode(ctx, sb, "kafka", dir, kafkaTempPrefix, []string{"data"}, cfg.Keep, 15*time.Second, ErrKafkaStopped)
	if err != nil {
		return nil, err
	}
	r := &realBroker{serverNode: node, id: id, controllerOnly: controllerOnly, keep: cfg.Keep}
	node.log = "server.log"
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		if controllerOnly { // it answers its brokers only: they tell
			return awaitListening(ctx, r.brokers[0], cfg.StartTimeout, exited)
		}
		return awaitKafka(ctx, r.brokers, int32(id), cfg.StartTimeout, exited)
	}
	logConfPath, err := r.writeConf(jars.dist.logFile, jars.dist.logConf, r.dir)
	if err != nil {
		r.removeDir()
		return nil, err
	}
	heap := cfg.heap(512)
	if controllerOnly {
		heap = min(heap, 256) // metadata only: a few topics' worth
	}
	args := []string{
		"-Xmx" + strconv.Itoa(heap) + "m",
		// What kafka-server-start.sh runs with (KAFKA_JVM_PERFORMANCE_OPTS).
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		jars.dist.logFlag + logConfPath,
		"-cp", jars.classpath, // the JVM expands a trailing * to every jar
		"kafka.Kafka", r.propsPath(),
	}
	name := "kafka"
	switch {
	case controllerOnly:
		name = "kafka-controller"
	case cfg.Nodes > 1:
		name = fmt.Sprintf("kafka-%d", id)
	}
	r.spec = sandbox.Spec{
		Name: name, Path: jars.java, Dir: r.dir, Args: args,
		CPU: cfg.CPU, MemoryMB: cfg.MemoryMB,
	}
	return r, nil
}

func (r *realBroker) propsPath() string { return filepath.Join(r.dir, "server.properties") }

// keptPorts returns the ports the nodes listened on in a previous run,
// as their server.properties say (the brokers', then the controller's),
// or nil when a node has none.
func keptPorts(nodes []*realBroker) []int {
	var ports []int
	for _, r := range nodes {
		b, err := os.ReadFile(r.propsPath())
		if err != nil {
			return nil
		}
		port := 0
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "listeners="); ok {
				_, after, _ := strings.Cut(strings.Split(rest, ",")[0], "127.0.0.1:")
				port, _ = strconv.Atoi(after)
			}
		}
		if port == 0 {
			return nil
		}
		ports = append(ports, port)
	}
	return ports
}

// formatted reports whether the node's storage holds a cluster already.
func (r *realBroker) formatted() bool {
	return fileExists(filepath.Join(r.dir, "data", "meta.properties"))
}

// eachNode runs fn on every node at once and returns their errors.
func eachNode(nodes []*realBroker, fn func(*realBroker) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, r := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(r); err != nil {
				errs[i] = err
				if len(nodes) > 1 {
					errs[i] = fmt.Errorf("node %d: %w", r.id, err)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// format writes the storage of a new cluster (meta.properties and the
// bootstrap metadata) into the data directory: kafka-storage format.
// extra adds to its arguments (the SCRAM users of a secured broker).
func (r *realBroker) format(ctx context.Context, jars kafkaJVM, clusterID string, extra ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	logFlag := jars.dist.logFlag + filepath.Join(r.dir, jars.dist.logFile)
	// A one-shot tool: C1 alone starts it faster (~0.7 s instead of ~1.2 s).
	args := append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", logFlag, "-cp", jars.classpath,
		"kafka.tools.StorageTool", "format", "-t", clusterID, "-c", r.propsPath()}, extra...)
	cmd := exec.CommandContext(ctx, jars.java, args...)
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

func (r *realBroker) stop() error {
	return r.serverNode.stop(func() {
		if r.ownDir {
			r.removeDir()
		} else if !r.keep {
			r.removeStorage()
		}
	})
}
