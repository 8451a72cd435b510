package scaleexp

import (
	"runtime"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/work"
)

// The setup items the run holds the first claim's rows to
// (Run.UsedInFirstClaim), where it passes them.
const (
	itemLBConfig  = "balancer config"
	itemNginxMain = "nginx.conf around the balancer config"
	itemWork      = "handler's work"
)

// reportNginx is report A1's nginx.conf, the whole of it.
const reportNginx = `upstream app {
server app1:8890;
server app2:8890;
server app3:8890;
}
server {
listen 8891;
location / {
proxy_pass http://app;
}
}`

// oursNginx is what the lab writes for it (conf.d/default.conf): the
// report's text, with the addresses this machine gives (StartLB's names).
const oursNginx = `upstream app { server <app1>; server <app2>; server <app3>; }
server { listen <lb>; location / { proxy_pass http://app; } }`

// imageNginxMain is nginx.conf in the nginx image the report ran, into
// whose http block its file was mounted (conf.d/default.conf).
const imageNginxMain = `user nginx; worker_processes auto; error_log /var/log/nginx/error.log notice; pid /var/run/nginx.pid;
events { worker_connections 1024; }
http { include /etc/nginx/mime.types; default_type application/octet-stream;
log_format main '$remote_addr - $remote_user [$time_local] "$request" ' '$status $body_bytes_sent "$http_referer" ' '"$http_user_agent" "$http_x_forwarded_for"';
access_log /var/log/nginx/access.log main; sendfile on; keepalive_timeout 65; include /etc/nginx/conf.d/*.conf; }`

// oursNginxMain is the nginx.conf the lab writes around it.
const oursNginxMain = `daemon off; worker_processes auto; error_log <prefix>/error.log notice; pid <prefix>/nginx.pid;
events { worker_connections 1024; }
http { default_type application/octet-stream;
log_format main '$remote_addr - $remote_user [$time_local] "$request" ' '$status $body_bytes_sent "$http_referer" ' '"$http_user_agent" "$http_x_forwarded_for"';
access_log /dev/null main; sendfile on; keepalive_timeout 65;
client_body_temp_path <prefix>/client_body; proxy_temp_path <prefix>/proxy; fastcgi_temp_path <prefix>/fastcgi; uwsgi_temp_path <prefix>/uwsgi; scgi_temp_path <prefix>/scgi;
include <prefix>/conf.d/default.conf; }`

// oursBuiltin is the built-in balancer's settings as the claims' rows run
// it (lb.Config.String of a Config with only upstreams).
const oursBuiltin = `round robin; a new upstream connection per request, closed after its answer (no idle connections kept); ` +
	`an upstream failing 1 time(s) within 10s marked down for 10s; a GET or HEAD that failed before its answer sent to the next upstream; ` +
	`connect timeout 2s, response header timeout 1m0s`

// setup is the experiment's setup beside the report's.
func setup(o lab.Options) []labresult.Setup {
	s := []labresult.Setup{{
		Item:       "Go",
		Report:     "golang:1.19.0-alpine3.16",
		Ours:       runtime.Version() + " (hlab serve work)",
		Why:        "the Go this project builds with; 1.19 is long out of support",
		FirstClaim: true,
	}, {
		Item:       "GOMAXPROCS of an instance",
		Report:     "the Docker VM's CPU count: Go 1.19 does not read the container's CPU limit",
		Ours:       "Go 1.25 and later's default: the quota rounded up but at least 2, at most the machine's CPUs (2 on the reference machine)",
		Why:        "the Go that runs; the quota, 20 ms of CPU per 100 ms, bounds the work either way, and a VM of more cores let the report's instances run more threads into it",
		FirstClaim: true,
	}}
	s = append(s, balancerSetup(o)...)
	s = append(s, []labresult.Setup{{
		Item:       itemWork,
		Report:     work.ReportCode,
		Ours:       work.Code,
		FirstClaim: true,
	}, {
		Item:   "service around the handler",
		Report: `http.HandleFunc("/handle", ...); http.ListenAndServe(":8890", nil): no timeouts, nothing else`,
		Ours:   "hlab serve work: net/http with read and write timeouts (30 s), GET /handle only, /healthz, /metrics and a request counter",
		Why: "every service of the project is bounded and observable; a counter and the metrics middleware cost microseconds " +
			"against the milliseconds of the work",
		FirstClaim: true,
	}, {
		Item:       "instance limits",
		Report:     "cpus: '0.2', memory: 500M per instance",
		Ours:       "cpus: '0.2', memory: 500M per instance",
		FirstClaim: true,
	}, {
		Item:   "load generator",
		Report: "wrk (skandyla/wrk) -t1 -c1 and -t3 -c3",
		Ours:   "hlab load, closed model, 1 and 3 connections",
		Why: "the lab's one load generator (latency histograms, goodput, per-run figures); each connection waits for its answer " +
			"before sending the next request, as wrk's do",
		FirstClaim: true,
	}, {
		Item:       "where the load generator runs",
		Report:     "a wrk container on the compose network, on Docker Desktop on a MacBook Pro",
		Ours:       "the lab's process on the same 2-core machine as the instances and the balancer, over loopback, outside the instances' quota",
		Why:        "there is no Docker engine here; the generator's CPU is measured and a row where it saturated is marked",
		FirstClaim: true,
	}, {
		Item:   "duration",
		Report: "-d5s; each figure an average over dozens of runs",
		Ours: "runs of 5 s, each at least 2,000 requests at the row's warm-up rate, after 1 s of warm-up; " +
			"a claim's two rows in alternating pairs, 3 to 12, until its interval decides",
		Why: "a 5 s run of a few hundred requests gives a coarse mean; pairs measured back to back cancel the drift " +
			"of a shared machine that averaging separate runs cannot",
		FirstClaim: true,
	}, {
		Item:   "ours: upstream keepalive (claim 3)",
		Report: "none: nginx's defaults, a new upstream connection per request",
		Ours:   keepaliveSetup(o),
		Why:    "ours: what keeping upstream connections open adds, as a claim of its own and the ratio keepalive-gain",
	}, {
		Item:   "fault rows",
		Report: "not measured: \"if one replica falls, the others keep working\"; \"the balancer becomes the single point of failure\"",
		Ours: "open model at 100 req/s for 5 s: one replica SIGKILLed a third into the run and left down (behind nginx with the report's config " +
			"when nginx runs, and behind the built-in balancer); the balancer SIGKILLed a third in and started again 1 s later",
		Why: "the report's pro and con, measured: what clients see",
	}}...)
	return s
}

// balancerSetup is the balancer's items: nginx with the report's config,
// or the built-in balancer standing in for it.
func balancerSetup(o lab.Options) []labresult.Setup {
	report := "nginx:latest (1.23.1 when golang:1.19.0 was current, August 2022), no CPU limit"
	if !o.UsesNginx() {
		return []labresult.Setup{{
			Item: "balancer", Report: report,
			Ours:       "the built-in balancer (hlab serve lb), no CPU limit",
			Why:        "nginx is not installed (make deps installs it) or --lb builtin asked for it: the built-in balancer stands in for nginx, run as nginx runs the report's config",
			FirstClaim: true,
		}, {
			Item: itemLBConfig, Report: reportNginx, Ours: oursBuiltin,
			Why: "the built-in balancer does what nginx does with the report's config: round robin, a new upstream connection per request, " +
				"nginx's max_fails=1 fail_timeout=10s and proxy_next_upstream error timeout; it speaks HTTP/1.1 with Connection: close " +
				"to the upstreams where nginx speaks HTTP/1.0, and gives up connecting after 2 s where nginx waits 60 s",
			FirstClaim: true,
		}}
	}
	version := "nginx"
	if _, v, err := deps.FindNginx(); err == nil {
		version += " " + v
	}
	return []labresult.Setup{{
		Item: "balancer", Report: report,
		Ours:       version + " (Debian's package), no CPU limit",
		Why:        "the nginx this machine installs from Debian; it proxies with the same defaults",
		FirstClaim: true,
	}, {
		Item: itemLBConfig, Report: reportNginx, Ours: oursNginx,
		Why: "the instances and nginx run as processes on this machine, not as compose services: nginx proxies to the loopback ports " +
			"the lab gives the instances (<app1> to <app3>) and listens on one of its own (<lb>); nothing else differs",
		FirstClaim: true,
	}, {
		Item: itemNginxMain, Report: imageNginxMain, Ours: oursNginxMain,
		Why: "what running nginx as a process needs: the foreground, and pid, error log and temp files in its own directory; " +
			"workers run as nobody (no nginx user here); the access log keeps the image's format and its write per request, " +
			"to /dev/null rather than a file that would fill the lab's directory; mime types matter to no proxied answer",
		FirstClaim: true,
	}}
}

// keepaliveSetup is ours of claim 3's balancer.
func keepaliveSetup(o lab.Options) string {
	if o.UsesNginx() {
		return `keepalive 64; proxy_http_version 1.1; proxy_set_header Connection "";`
	}
	return "the built-in balancer with 64 idle keep-alive connections per upstream, over HTTP/1.1"
}
