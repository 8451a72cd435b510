package deps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// ErrNginxNotInstalled is returned by FindNginx when no nginx binary is found.
var ErrNginxNotInstalled = errors.New("deps: nginx is not installed (install it with 'apt-get install -y nginx', or run 'make deps'; the lab falls back to its built-in load balancer)")

// FindNginx returns the path of the nginx binary and its version (e.g. "1.22.1").
func FindNginx() (path, version string, err error) {
	return program{
		name: "nginx", places: []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"},
		missing: ErrNginxNotInstalled,
		// nginx -v prints "nginx version: nginx/1.22.1" on stderr.
		versionArgs: []string{"-v"}, version: regexp.MustCompile(`nginx/(\S+)`),
	}.find()
}

// NginxLB is a running nginx that balances round robin over upstreams.
type NginxLB struct {
	Version string
	Addr    string // host:port it listens on
	Proc    *sandbox.Process
	dir     string
}

// nginxConf mirrors what a docker-compose setup like report A1's runs: an
// upstream block with keepalive connections and HTTP/1.1 to the upstreams,
// no access log (it would cost as much as the proxying), and every path
// nginx writes kept inside its own prefix.
var nginxConf = template.Must(template.New("nginx").Parse(`daemon off;
master_process on;
worker_processes {{.Workers}};
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;
{{- if .Upstreams}}
    upstream app {
{{- range .Upstreams}}
        server {{.}};
{{- end}}
        keepalive 64;
    }
{{- end}}
    server {
        listen {{.Addr}} backlog=4096;
{{- if not .Upstreams}}
        location / {
            default_type text/plain;
            return 200 "hlab nginx: no upstreams to balance over (hlab deps up nginx --upstream HOST:PORT,...)\n";
        }
{{- else}}
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 2s;
            proxy_send_timeout 60s;
            proxy_read_timeout 60s;
        }
{{- end}}
    }
}
`))

// NginxConfig is what StartNginx needs.
type NginxConfig struct {
	// Upstreams are host:port, round robin in this order. None: nginx
	// answers every request itself with 200 and a line saying it has no
	// upstreams (a standalone nginx started without any).
	Upstreams []string
	Dir       string // prefix directory for config, pid, logs and temp files
	Workers   int    // worker_processes (default 1)
	// HealthPath is requested through nginx to decide it is ready
	// (default /healthz).
	HealthPath string
	// Port is the port to listen on; 0 = a free one.
	Port int
}

// RenderNginxConf returns the nginx.conf for cfg listening on addr.
func RenderNginxConf(cfg NginxConfig, addr string) ([]byte, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	var buf bytes.Buffer
	err := nginxConf.Execute(&buf, struct {
		NginxConfig
		Addr string
	}{cfg, addr})
	return buf.Bytes(), err
}

// StartNginx writes a config for cfg and starts nginx under sb with no
// quota (the reports ran their load balancer outside the apps' limits).
// It returns once a request through nginx reaches an upstream.
func StartNginx(ctx context.Context, sb *sandbox.Sandbox, cfg NginxConfig) (*NginxLB, error) {
	path, version, err := FindNginx()
	if err != nil {
		return nil, err
	}
	// nginx reads relative paths against its prefix, so hand it absolute ones.
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, fmt.Errorf("deps: nginx prefix: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("deps: nginx prefix: %w", err)
	}
	if cfg.HealthPath == "" {
		cfg.HealthPath = "/healthz"
	}
	var lb *NginxLB
	err = onPorts(ctx, cfg.Port, 1, func(ports []int) error {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		conf, err := RenderNginxConf(cfg, addr)
		if err != nil {
			return err
		}
		confPath := filepath.Join(cfg.Dir, "nginx.conf")
		if err := os.WriteFile(confPath, conf, 0o644); err != nil {
			return fmt.Errorf("deps: nginx config: %w", err)
		}
		logf, err := os.Create(filepath.Join(cfg.Dir, "stderr.log"))
		if err != nil {
			return fmt.Errorf("deps: nginx log: %w", err)
		}
		defer logf.Close() // the process has its own descriptor
		proc, err := sb.Start(ctx, sandbox.Spec{
			Name: "nginx", Path: path,
			Args:   []string{"-p", cfg.Dir, "-c", confPath, "-e", filepath.Join(cfg.Dir, "error.log")},
			Stdout: logf, Stderr: logf,
		})
		if err != nil {
			return fmt.Errorf("deps: start nginx: %w", err)
		}
		if err := AwaitHTTP(ctx, "http://"+addr+cfg.HealthPath, 10*time.Second, proc.Done()); err != nil {
			proc.Stop(2 * time.Second)
			// nginx says why in its error log ("bind() ... failed (98:
			// Address already in use)" when its port was taken).
			return fmt.Errorf("deps: nginx did not become ready: %w; %s", err, tail(filepath.Join(cfg.Dir, "error.log")))
		}
		lb = &NginxLB{Version: version, Addr: addr, Proc: proc, dir: cfg.Dir}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lb, nil
}

// Stop stops nginx (SIGTERM is nginx's fast shutdown).
func (n *NginxLB) Stop() error { return n.Proc.Stop(5 * time.Second) }

// tail returns the last lines of a log file for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return path + ": " + strings.Join(lines, " | ")
}
