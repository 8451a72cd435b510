package deps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// ErrPrometheusNotInstalled is returned by FindPrometheus, FindPromtool
// and StartPrometheus when Debian's prometheus package (which has both
// programs) is not installed.
var ErrPrometheusNotInstalled = errors.New("deps: prometheus is not installed (install it with 'apt-get install -y --no-install-recommends prometheus', 'hlab deps install prometheus', or run 'make deps')")

// FindPrometheus returns the path of the prometheus server and its
// version (e.g. "2.42.0+ds").
func FindPrometheus() (path, version string, err error) {
	return prometheusProgram("prometheus").find()
}

// FindPromtool returns the path of promtool, Prometheus' checker of
// configs and rules, and its version; it comes in the same package.
func FindPromtool() (path, version string, err error) {
	return prometheusProgram("promtool").find()
}

func prometheusProgram(name string) program {
	return program{
		name: name, places: []string{"/usr/bin/" + name, "/usr/local/bin/" + name},
		missing: ErrPrometheusNotInstalled,
		// "prometheus, version 2.42.0+ds (branch: debian/sid, ...)"
		versionArgs: []string{"--version"}, version: regexp.MustCompile(`version (\S+)`),
	}
}

// InstallPrometheus installs Debian's prometheus package (promtool comes
// with it; the node exporter it recommends does not) when prometheus is
// missing, with apt-get (it needs root). hlab runs its own servers: on a
// machine that runs systemd, the package's service, started on :9090 by
// the install, is stopped and disabled again. Progress goes to w.
func InstallPrometheus(ctx context.Context, w io.Writer) error {
	if _, _, err := FindPrometheus(); err == nil {
		return nil
	}
	if err := aptGet(ctx, w, []string{"prometheus"}, "prometheus", "sudo hlab deps install prometheus"); err != nil {
		return err
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		out, err := exec.CommandContext(ctx, "systemctl", "disable", "--now", "prometheus.service").CombinedOutput()
		if err != nil {
			fmt.Fprintf(w, "deps: could not stop the package's own prometheus service (hlab does not use it; it listens on :9090): %v: %s\n", err, lastBytes(out, 200))
		} else {
			fmt.Fprintln(w, "deps: stopped and disabled the package's own prometheus service (hlab runs its own servers)")
		}
	}
	return nil
}

// PrometheusConfig is what StartPrometheus needs.
type PrometheusConfig struct {
	// Config is the server's prometheus.yml: its scrape jobs and the
	// rule files it loads (rule_files, relative to the file's directory).
	Config []byte
	// Files are written beside prometheus.yml, by path relative to it:
	// the rule files Config names.
	Files map[string][]byte
	// Dir holds prometheus.yml, Files, the server's log (stdout.log) and
	// its time series (data/). "" = a temporary directory that Stop
	// removes.
	Dir string
	// Keep keeps the time series a previous run left in Dir (a
	// standalone server restarted); otherwise data/ starts empty.
	Keep bool
	// Retention is how long samples are kept (default 1 day: the server
	// is for watching a run, not for history).
	Retention time.Duration
	// Port is the port to listen on; 0 = a free one.
	Port int
	// StartTimeout bounds the wait for /-/ready (default 30 s: the
	// write-ahead log of a kept Dir is replayed first).
	StartTimeout time.Duration
}

// Prometheus is a running Prometheus server on 127.0.0.1.
type Prometheus struct {
	Kind    string // "prometheus 2.42.0+ds", for a run's environment record
	Version string
	Addr    string // 127.0.0.1:port
	URL     string // http://127.0.0.1:port, for the HTTP API
	Dir     string
	Args    []string // the server's arguments

	node *serverNode
}

// StartPrometheus writes cfg's files and starts Prometheus under sb with
// no quota (it watches the services under test, outside their limits),
// and returns once /-/ready answers: its configuration and rule files
// loaded. A config Prometheus refuses makes it exit at once; the error
// quotes why from its log. ctx bounds its life as with sandbox.Start,
// and the wait.
func StartPrometheus(ctx context.Context, sb *sandbox.Sandbox, cfg PrometheusConfig) (*Prometheus, error) {
	if sb == nil {
		return nil, errors.New("deps: StartPrometheus needs a sandbox to run the server in")
	}
	if len(cfg.Config) == 0 {
		return nil, errors.New("deps: StartPrometheus needs a config (prometheus.yml's contents)")
	}
	path, version, err := FindPrometheus()
	if err != nil {
		return nil, err
	}
	defaults.Positive(&cfg.StartTimeout, 30*time.Second)
	defaults.Positive(&cfg.Retention, 24*time.Hour)
	node, err := newServerNode(ctx, sb, "prometheus", cfg.Dir, "hlab-prometheus-", []string{"data"}, cfg.Keep, 10*time.Second, nil)
	if err != nil {
		return nil, err
	}
	p := &Prometheus{Kind: "prometheus " + version, Version: version, Dir: node.dir, node: node}
	if err := p.writeFiles(cfg); err != nil {
		node.removeDir()
		return nil, err
	}
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		return AwaitHTTP(ctx, p.URL+"/-/ready", cfg.StartTimeout, exited)
	}
	err = onPorts(ctx, cfg.Port, 1, func(ports []int) error {
		p.Addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
		p.URL = "http://" + p.Addr
		p.Args = []string{
			"--config.file=" + filepath.Join(p.Dir, "prometheus.yml"),
			"--storage.tsdb.path=" + filepath.Join(p.Dir, "data"),
			"--storage.tsdb.retention.time=" + promDuration(cfg.Retention),
			"--web.listen-address=" + p.Addr,
		}
		node.spec = sandbox.Spec{Name: "prometheus", Path: path, Args: p.Args, Dir: p.Dir}
		return node.startServer(ctx)
	})
	if err != nil {
		node.removeDir()
		return nil, err
	}
	return p, nil
}

// writeFiles writes prometheus.yml and the files beside it, each at a
// relative path that stays inside the directory. The subdirectories the
// files go in are emptied first: in a kept Dir, a rule file that a newer
// config no longer has would still match its rule_files glob.
func (p *Prometheus) writeFiles(cfg PrometheusConfig) error {
	files := map[string][]byte{"prometheus.yml": cfg.Config}
	for name, b := range cfg.Files {
		if !filepath.IsLocal(name) || name == "data" || strings.HasPrefix(filepath.Clean(name), "data"+string(filepath.Separator)) {
			return fmt.Errorf("deps: prometheus file %q: give a relative path inside its directory, outside data/", name)
		}
		files[name] = b
	}
	for name := range cfg.Files {
		if top, _, nested := strings.Cut(filepath.ToSlash(filepath.Clean(name)), "/"); nested {
			if err := os.RemoveAll(filepath.Join(p.Dir, top)); err != nil {
				return fmt.Errorf("deps: prometheus %s: %w", top, err)
			}
		}
	}
	for name, b := range files {
		path := filepath.Join(p.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("deps: prometheus %s: %w", name, err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("deps: prometheus %s: %w", name, err)
		}
	}
	return nil
}

// promDuration writes d as Prometheus reads durations: whole seconds at
// least ("86400s"), no fractions or compound units.
func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int64(d/time.Second)))
}

// Proc returns the server's process (nil after Stop or Kill).
func (p *Prometheus) Proc() *sandbox.Process { return p.node.process() }

// Kill SIGKILLs the server, as a crash would.
func (p *Prometheus) Kill() error { return p.node.killServer() }

// Stop stops the server (SIGTERM: it closes its head block and exits;
// SIGKILL after 10 s) and removes a temporary Dir. It is idempotent.
func (p *Prometheus) Stop() error { return p.node.stop(p.node.removeDir) }

// Query evaluates expr now through the server's HTTP API
// (QueryPrometheus).
func (p *Prometheus) Query(ctx context.Context, expr string) ([]PromSample, error) {
	return QueryPrometheus(ctx, p.URL, expr)
}
