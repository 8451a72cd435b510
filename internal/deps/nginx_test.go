package deps

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRenderNginxConf(t *testing.T) {
	conf, err := RenderNginxConf(NginxConfig{Upstreams: []string{"127.0.0.1:1", "127.0.0.1:2"}, Dir: "/tmp/x"}, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server 127.0.0.1:1;", "server 127.0.0.1:2;", "keepalive 64;", "listen 127.0.0.1:9", "proxy_http_version 1.1;", `proxy_set_header Connection "";`, "pid /tmp/x/nginx.pid;", "daemon off;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("config lacks %q", want)
		}
	}
	if conf, err := RenderNginxConf(NginxConfig{}, "127.0.0.1:9"); err != nil || !strings.Contains(string(conf), "return 200") || strings.Contains(string(conf), "proxy_pass") {
		t.Errorf("no upstreams: want nginx to answer itself, got %v:\n%s", err, conf)
	}
}

// TestNginxRoundRobin starts the real nginx in front of three upstreams and
// checks that it spreads requests over all of them.
func TestNginxRoundRobin(t *testing.T) {
	if _, _, err := FindNginx(); errors.Is(err, ErrNginxNotInstalled) {
		t.Skip("nginx not installed (make deps installs it)")
	}
	var ups []string
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
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
