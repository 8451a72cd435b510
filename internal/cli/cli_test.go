package cli

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &State{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

// closedPort returns an address where nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestLoadBadInput(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"malformed URL", []string{"load", "--requests", "1", "http://[::1"}, "malformed URL"},
		{"not http", []string{"load", "--requests", "1", "ftp://127.0.0.1/"}, "http://"},
		{"no host", []string{"load", "--requests", "1", "http:///path"}, "no host"},
		{"negative rate", []string{"load", "--rate", "-5", srv.URL}, "negative"},
		{"unreachable host", []string{"load", "--requests", "1", "http://" + closedPort(t) + "/"}, "cannot reach"},
		{"no URL", []string{"load", "--requests", "1"}, "exactly one URL"},
		{"bad header", []string{"load", "--header", "nocolon", srv.URL}, "Key: Value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(tt.args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; stderr %q", stderr)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("stderr %q does not explain %q", stderr, tt.wantErr)
			}
			if tt.name != "bad header" { // flag errors also print usage
				if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
					t.Fatalf("want a one-line explanation, got %d lines: %q", lines, stderr)
				}
			}
		})
	}
}

func TestLoadJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }))
	defer srv.Close()
	code, out, stderr := run("load", "--connections", "2", "--requests", "50", "--json", srv.URL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, key := range []string{`"requests":50`, `"rps"`, `"success_ratio":1`, `"status_codes":{"200":50}`, `"latency_ms"`, `"latency_uncorrected_ms"`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s: %s", key, out)
		}
	}
}

func TestLabUnknownExperimentListsKnown(t *testing.T) {
	code, _, stderr := run("lab", "nosuch")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr, `no experiment "nosuch"`) || !strings.Contains(stderr, "scale") {
		t.Fatalf("stderr does not list the known experiments: %q", stderr)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, _, stderr := run("frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestServeUnknown(t *testing.T) {
	if code, _, stderr := run("serve", "nosuch"); code != 2 || !strings.Contains(stderr, "work") {
		t.Fatalf("exit %d, stderr %q: want the list of services", code, stderr)
	}
}
