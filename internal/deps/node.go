package deps

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// serverNode is a dependency's server that runs as one process under the
// sandbox, in a directory of its own (Cassandra, the real Kafka broker
// and the mongo stand-in on the JVM; Redis), and that tests may take down
// and bring back on the same data and ports: its directory, its launch
// and wait, its logs and its restarts.
type serverNode struct {
	what    string           // "cassandra", "kafka": names errors
	sb      *sandbox.Sandbox // where the process runs
	life    context.Context  // bounds the process, as with sandbox.Start
	spec    sandbox.Spec     // the command; Stdout/Stderr set per start
	dir     string
	ownDir  bool     // a temporary directory: removed by stop
	storage []string // the subdirectories of the node's identity and data
	// stdout is the file in dir that gets the process's stdout and
	// stderr ("stdout.log"; Redis logs there: "redis.log"). log, when
	// set, is the server's own log in dir ("system.log", "server.log").
	// A failed start is explained from what it appended to them.
	stdout, log string
	// await waits until the node answers, giving up when exited closes.
	await func(ctx context.Context, exited <-chan struct{}) error

	restartable
}

// newServerNode returns a node in dir, or with dir "" in a new temporary
// directory under prefix (swept of dead owners' leftovers), and with
// storage, its data subdirectories, emptied: a new node is a new cluster,
// unless keep (a standalone dependency restarted on its data).
// stopTimeout is how long SIGTERM has before SIGKILL; errStopped is what
// a start after a stop for good returns. Its stdout goes to stdout.log.
func newServerNode(ctx context.Context, sb *sandbox.Sandbox, what, dir, prefix string, storage []string, keep bool, stopTimeout time.Duration, errStopped error) (*serverNode, error) {
	n := &serverNode{what: what, sb: sb, life: ctx, storage: storage, stdout: "stdout.log"}
	n.restartable = restartable{what: what, stopTimeout: stopTimeout, errStopped: errStopped, launch: n.launch}
	var err error
	if n.dir, n.ownDir, err = depDir(what, dir, prefix); err != nil {
		return nil, err
	}
	if !n.ownDir && !keep {
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
func (n *serverNode) writeConf(name string, t *template.Template, data any) (string, error) {
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

// launch starts the process and waits until it answers
// (restartable.launch).
func (n *serverNode) launch(ctx context.Context) (*sandbox.Process, error) {
	stdoutPath := filepath.Join(n.dir, n.stdout)
	logs := []string{stdoutPath}
	if n.log != "" {
		logs = []string{filepath.Join(n.dir, n.log), stdoutPath}
	}
	// Errors are looked for in what this start appended to the logs.
	from := map[string]int64{}
	for _, l := range logs {
		from[l] = fileSize(l)
	}
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
		return nil, fmt.Errorf("%w; %s", err, logsSince(from, logs...))
	}
	return proc, nil
}

// removeStorage removes the node's data subdirectories.
func (n *serverNode) removeStorage() {
	for _, d := range n.storage {
		os.RemoveAll(filepath.Join(n.dir, d))
	}
}

// removeDir removes a temporary directory.
func (n *serverNode) removeDir() {
	if n.ownDir {
		os.RemoveAll(n.dir)
	}
}
