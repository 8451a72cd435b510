package deps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	// Main and Site are the two files it runs: nginx.conf, and the site
	// config it includes (conf.d/default.conf, the file report A1 wrote).
	Main, Site string
	dir        string
}

// nginxMain is nginx.conf as the nginx image report A1 ran (nginx:latest)
// has it, with what running it here needs instead of the image's paths
// and user: the foreground, pid, error log and temp files in its prefix.
// The access log keeps the image's format and write per request, to
// /dev/null rather than a log file that would fill the lab's directory.
var nginxMain = template.Must(template.New("nginx").Parse(`daemon off;
worker_processes {{.Workers}};
error_log {{.Dir}}/error.log notice;
pid {{.Dir}}/nginx.pid;
events {
    worker_connections 1024;
}
http {
    default_type application/octet-stream;
    log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                    '$status $body_bytes_sent "$http_referer" '
                    '"$http_user_agent" "$http_x_forwarded_for"';
    access_log /dev/null main;
    sendfile on;
    keepalive_timeout 65;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;
    include {{.Dir}}/conf.d/default.conf;
}
`))

// nginxSite is report A1's nginx.conf, the whole of it: an upstream
// block and a server that proxies to it, with nginx's defaults (HTTP/1.0
// to the upstreams, a new upstream connection per request). With
// UpstreamKeepalive, the three lines that keep upstream connections open
// are added.
var nginxSite = template.Must(template.New("site").Parse(`{{if .Upstreams -}}
upstream app {
{{- range .Upstreams}}
    server {{.}};
{{- end}}
{{- if .UpstreamKeepalive}}
    keepalive {{.UpstreamKeepalive}};
{{- end}}
}
server {
    listen {{.Addr}};
    location / {
        proxy_pass http://app;
{{- if .UpstreamKeepalive}}
        proxy_http_version 1.1;
        proxy_set_header Connection "";
{{- end}}
    }
}
{{- else -}}
server {
    listen {{.Addr}};
    location / {
        default_type text/plain;
        return 200 "hlab nginx: no upstreams to balance over (hlab deps up nginx --upstream HOST:PORT,...)\n";
    }
}
{{- end}}
`))

// NginxConfig is what StartNginx needs.
type NginxConfig struct {
	// Upstreams are host:port, round robin in this order. None: nginx
	// answers every request itself with 200 and a line saying it has no
	// upstreams (a standalone nginx started without any).
	Upstreams []string
	// UpstreamKeepalive is the upstream block's keepalive: idle
	// connections each worker keeps to the upstreams, over HTTP/1.1. 0:
	// none, nginx's default and report A1's.
	UpstreamKeepalive int
	Dir               string // prefix directory for config, pid, logs and temp files
	// Workers is worker_processes (default "auto", the image's: one per core).
	Workers int
	// HealthPath is requested through nginx to decide it is ready
	// (default /healthz).
	HealthPath string
	// Port is the port to listen on; 0 = a free one.
	Port int
}

// RenderNginxConf returns nginx.conf and the site config it includes
// (conf.d/default.conf in cfg.Dir) for cfg listening on addr.
func RenderNginxConf(cfg NginxConfig, addr string) (main, site []byte, err error) {
	workers := "auto"
	if cfg.Workers > 0 {
		workers = strconv.Itoa(cfg.Workers)
	}
	var m, st bytes.Buffer
	if err := nginxMain.Execute(&m, struct {
		Dir, Workers string
	}{cfg.Dir, workers}); err != nil {
		return nil, nil, err
	}
	err = nginxSite.Execute(&st, struct {
		NginxConfig
		Addr string
	}{cfg, addr})
	return m.Bytes(), st.Bytes(), err
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
		conf, site, err := RenderNginxConf(cfg, addr)
		if err != nil {
			return err
		}
		confPath := filepath.Join(cfg.Dir, "nginx.conf")
		if err := os.MkdirAll(filepath.Join(cfg.Dir, "conf.d"), 0o755); err != nil {
			return fmt.Errorf("deps: nginx config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(cfg.Dir, "conf.d", "default.conf"), site, 0o644); err != nil {
			return fmt.Errorf("deps: nginx config: %w", err)
		}
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
		lb = &NginxLB{Version: version, Addr: addr, Proc: proc, Main: string(conf), Site: string(site), dir: cfg.Dir}
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
