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

// TestLabExternalFlags: the servers --postgres, --kafka-brokers and
// --cassandra name are checked before anything runs, and the errors say
// which flag and what to do (exit 2, nothing started); --help explains
// them.
func TestLabExternalFlags(t *testing.T) {
	closed := closedPort(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unused", []string{"lab", "scale", "--postgres", "postgres://u:pw@" + closed + "/db"}, "--postgres is unused: none of the experiments selected (scale) uses postgres"},
		{"not a URL", []string{"lab", "crud", "--postgres", "localhost:5432"}, "is not a Postgres URL"},
		{"unreachable", []string{"lab", "crud", "--postgres", "postgres://u:secretpw@" + closed + "/db"}, "cannot connect to the Postgres server at postgres://u:***@" + closed},
		{"brokers", []string{"lab", "async", "--kafka-brokers", "kafka"}, `"kafka" is not host:port`},
		{"real and brokers", []string{"lab", "async", "--kafka", "real", "--kafka-brokers", closed}, "exclude each other"},
		{"cassandra unused", []string{"lab", "async", "--cassandra", closed}, "--cassandra is unused"},
		{"kafka security without brokers", []string{"lab", "databus", "--kafka-tls"}, "give the brokers too"},
		{"kafka security on plaintext clients", []string{"lab", "async", "--kafka-brokers", closed, "--kafka-tls"}, "experiment async connects to Kafka in plaintext only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(append(tt.args, "--report", t.TempDir())...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q: want 2 and %q", code, stderr, tt.want)
			}
			if strings.Contains(stderr, "secretpw") {
				t.Fatalf("the error shows the password: %q", stderr)
			}
		})
	}
	_, _, help := run("lab", "--help")
	for _, f := range []string{"--postgres", "--kafka-brokers", "--cassandra", "On your own servers", "--kafka-sasl", "--kafka-password-file"} {
		if !strings.Contains(help, f) {
			t.Errorf("--help does not explain %s", f)
		}
	}
}
