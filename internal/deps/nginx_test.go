package deps

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRenderNginxConf checks the site config is report A1's, whole, by
// default (nginx's defaults: no upstream keepalive), that keepalive adds
// exactly its three lines, and that nginx.conf keeps every path in the
// prefix.
func TestRenderNginxConf(t *testing.T) {
	cfg := NginxConfig{Upstreams: []string{"127.0.0.1:1", "127.0.0.1:2"}, Dir: "/tmp/x"}
	main, site, err := RenderNginxConf(cfg, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	report := "upstream app { server 127.0.0.1:1; server 127.0.0.1:2; } server { listen 127.0.0.1:9; location / { proxy_pass http://app; } }"
	if got := strings.Join(strings.Fields(string(site)), " "); got != report {
		t.Errorf("site config\n%s\nwant the report's\n%s", got, report)
	}
	for _, want := range []string{"daemon off;", "pid /tmp/x/nginx.pid;", "error_log /tmp/x/error.log", "include /tmp/x/conf.d/default.conf;", "worker_processes auto;"} {
		if !strings.Contains(string(main), want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	cfg.UpstreamKeepalive = 64
	_, ka, err := RenderNginxConf(cfg, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"keepalive 64;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`} {
		if !strings.Contains(string(ka), want) || strings.Contains(string(site), want) {
			t.Errorf("%q: want it with keepalive only", want)
		}
	}
	if _, site, err := RenderNginxConf(NginxConfig{}, "127.0.0.1:9"); err != nil || !strings.Contains(string(site), "return 200") || strings.Contains(string(site), "proxy_pass") {
		t.Errorf("no upstreams: want nginx to answer itself, got %v:\n%s", err, site)
	}
}

// TestNginxRoundRobin starts the real nginx in front of three upstreams and
// checks that it spreads requests over all of them, as report A1's config
// does: over HTTP/1.0, a new upstream connection per request.
func TestNginxRoundRobin(t *testing.T) {
	if _, _, err := FindNginx(); errors.Is(err, ErrNginxNotInstalled) {
		t.Skip("nginx not installed (make deps installs it)")
	}
	var ups []string
	var mu sync.Mutex
	protos := map[string]int{}
	var conns atomic.Int64
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			protos[r.Proto]++
			mu.Unlock()
			io.WriteString(w, name)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		ups = append(ups, strings.TrimPrefix(srv.URL, "http://"))
	}
	sb := testSandbox(t)
	// A relative prefix, as "hlab lab" gives by default (lab-report/logs).
	t.Chdir(t.TempDir())
	n, err := StartNginx(context.Background(), sb, NginxConfig{Upstreams: ups, Dir: "logs/nginx"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if n.Version == "" {
		t.Error("no nginx version recorded")
	}
	seen := map[string]int{}
	for range 30 {
		resp, err := http.Get("http://" + n.Addr + "/handle")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[string(b)]++
	}
	mu.Lock()
	defer mu.Unlock()
	// The readiness probe went through nginx too: at least 31 requests.
	if len(protos) != 1 || protos["HTTP/1.0"] < 31 || conns.Load() < int64(protos["HTTP/1.0"]) {
		t.Errorf("the upstreams saw %v over %d connections, want every request over HTTP/1.0 on a connection of its own (nginx's defaults)", protos, conns.Load())
	}
	for _, name := range []string{"a", "b", "c"} {
		if seen[name] != 10 {
			t.Errorf("upstream %s got %d of 30 requests, want 10 (round robin): %v", name, seen[name], seen)
		}
	}
}

func TestAwaitHTTPGivesUpOnExit(t *testing.T) {
	exited := make(chan struct{})
	close(exited)
	err := AwaitHTTP(context.Background(), "http://127.0.0.1:1/healthz", 5e9, exited)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("AwaitHTTP = %v, want it to give up when the process exited", err)
	}
}
