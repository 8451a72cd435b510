package deps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/template"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// JVMConfig is what the configs of the dependencies that run on the JVM
// (CassandraConfig, KafkaConfig's real broker, MongoConfig) share.
type JVMConfig struct {
	// HeapMB is the heap (-Xmx; Cassandra's -Xms too); 0 = the
	// dependency's default (Cassandra 1024, Kafka and Mongo 512), or half
	// of MemoryMB when that is smaller.
	HeapMB   int
	CPU      float64 // sandbox CPU quota (fraction of a core); 0 = none
	MemoryMB int     // sandbox memory limit; 0 = none
	// StartTimeout bounds the wait until the server answers (also after a
	// restart); 0 = the dependency's default, said in its config.
	// Fetching the jars is not counted.
	StartTimeout time.Duration
	// Log receives the progress of a jar download (Maven's output); nil =
	// discard.
	Log io.Writer
}

// heap returns the heap in MB: HeapMB when set, else def but at most half
// of MemoryMB when that limit is set.
func (c JVMConfig) heap(def int) int {
	if c.HeapMB > 0 {
		return c.HeapMB
	}
	if c.MemoryMB > 0 && c.MemoryMB/2 < def {
		return c.MemoryMB / 2
	}
	return def
}

// JVMSetup says what a dependency that runs on the JVM needs and has:
// its jars, Java, and Maven (which fetches the jars).
type JVMSetup struct {
	LibDir string // where its jars are (or go)
	Cached bool   // all jars are in LibDir
	SizeMB float64

	Java, JavaVersion string // path and version; "" when missing
	JavaErr           error  // why java is unusable (missing, too old)
	Maven, MavenVer   string // path and version; "" when missing
	MavenErr          error
}

// Ready reports whether the dependency can start without installing or
// downloading anything.
func (s JVMSetup) Ready() bool { return s.Cached && s.JavaErr == nil }

// checkJVMSetup reports what what ("kafka 3.9.2") needs and has, its jars
// in lib (cached: all there), running on java minJava or newer.
func checkJVMSetup(lib string, cached bool, minJava int, what string) JVMSetup {
	s := JVMSetup{LibDir: lib, Cached: cached}
	if s.Cached {
		s.SizeMB = float64(dirSize(s.LibDir)) / (1 << 20)
	}
	s.Java, s.JavaVersion, s.JavaErr = FindJava()
	if s.JavaErr == nil {
		s.JavaErr = checkJava(s.JavaVersion, minJava, what)
	}
	s.Maven, s.MavenVer, s.MavenErr = FindMaven()
	return s
}

// checkJava says when java version v is older than minimum, which what
// ("kafka 3.9.2") needs.
func checkJava(v string, minimum int, what string) error {
	if v == "unknown" || javaMajor(v) >= minimum {
		return nil
	}
	return fmt.Errorf("deps: java %s is too old for %s, which needs %d or newer (install it with 'apt-get install -y openjdk-17-jre-headless')", v, what, minimum)
}

// jvmNode is a dependency's server that runs as one JVM under the
// sandbox, in a directory of its own, and that tests take down and bring
// back on the same data and ports (Cassandra, the real Kafka broker): its
// directory, its launch and wait, its logs and its restarts.
type jvmNode struct {
	what    string           // "cassandra", "kafka": names the process and errors
	sb      *sandbox.Sandbox // where the JVM runs
	life    context.Context  // bounds the process, as with sandbox.Start
	spec    sandbox.Spec     // the java command; Stdout/Stderr set per start
	dir     string
	ownDir  bool     // a temporary directory: removed by stop
	storage []string // the subdirectories of the node's identity and data
	// log is the JVM's own log in dir ("system.log", "server.log"): with
	// stdout.log, where a failed start is explained.
	log string
	// await waits until the node answers, giving up when exited closes.
	await func(ctx context.Context, exited <-chan struct{}) error

	restartable
}

// newJVMNode returns a node in dir, or with dir "" in a new temporary
// directory under prefix (swept of dead owners' leftovers), and with
// storage, its data subdirectories, emptied: a new node is a new cluster.
// stopTimeout is how long SIGTERM has before SIGKILL; errStopped is what
// a start after a stop for good returns.
func newJVMNode(ctx context.Context, sb *sandbox.Sandbox, what, dir, prefix string, storage []string, stopTimeout time.Duration, errStopped error) (*jvmNode, error) {
	n := &jvmNode{what: what, sb: sb, life: ctx, storage: storage}
	n.restartable = restartable{what: what, stopTimeout: stopTimeout, errStopped: errStopped, launch: n.launch}
	var err error
	if n.dir, n.ownDir, err = depDir(what, dir, prefix); err != nil {
		return nil, err
	}
	if !n.ownDir {
		n.removeStorage()
	}
	return n, nil
}

// depDir returns a dependency's directory: dir made absolute and
// created, or with dir "" a new temporary directory under prefix (own:
// the caller removes it), sweeping the leftovers of dead owners.
func depDir(what, dir, prefix string) (path string, own bool, err error) {
	if dir == "" {
		if path, err = ownedTempDir(prefix); err != nil {
			return "", false, fmt.Errorf("deps: %s dir: %w", what, err)
		}
		return path, true, nil
	}
	if path, err = filepath.Abs(dir); err == nil {
		err = os.MkdirAll(path, 0o755)
	}
	if err != nil {
		return "", false, fmt.Errorf("deps: %s dir: %w", what, err)
	}
	return path, false, nil
}

// writeConf writes the template t filled with data into the node's
// directory as name, returning its path.
func (n *jvmNode) writeConf(name string, t *template.Template, data any) (string, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", err
	}
	path := filepath.Join(n.dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("deps: %s %s: %w", n.what, name, err)
	}
	return path, nil
}

// launch starts the JVM and waits until it answers (restartable.launch).
func (n *jvmNode) launch(ctx context.Context) (*sandbox.Process, error) {
	stdoutPath := filepath.Join(n.dir, "stdout.log")
	jvmLog := filepath.Join(n.dir, n.log)
	// Errors are looked for in what this start appended to the logs.
	from := map[string]int64{stdoutPath: fileSize(stdoutPath), jvmLog: fileSize(jvmLog)}
	logf, err := os.OpenFile(stdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("deps: %s log: %w", n.what, err)
	}
	defer logf.Close() // the process has its own descriptor
	spec := n.spec
	spec.Stdout, spec.Stderr = logf, logf
	proc, err := n.sb.Start(n.life, spec)
	if err != nil {
		return nil, fmt.Errorf("deps: start %s: %w", n.what, err)
	}
	if err := n.await(ctx, proc.Done()); err != nil {
		proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("%w; %s", err, logsSince(from, jvmLog, stdoutPath))
	}
	return proc, nil
}

// removeStorage removes the node's data subdirectories.
func (n *jvmNode) removeStorage() {
	for _, d := range n.storage {
		os.RemoveAll(filepath.Join(n.dir, d))
	}
}

// removeDir removes a temporary directory.
func (n *jvmNode) removeDir() {
	if n.ownDir {
		os.RemoveAll(n.dir)
	}
}
