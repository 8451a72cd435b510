package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server/servertest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestServeHelp: every service has the flags every service shares, and
// the ones whose handlers run long by design have no write timeout.
func TestServeHelp(t *testing.T) {
	noWriteTimeout := map[string]bool{"backend": true, "frontend": true, "lb": true}
	for name := range services {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := run("serve", name, "--help")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, flag := range []string{"-addr", "-admin-addr", "-read-timeout", "-write-timeout"} {
				if !strings.Contains(stderr, "  "+flag+" ") {
					t.Errorf("no %s in the help:\n%s", flag, stderr)
				}
			}
			_, writeHelp, _ := strings.Cut(stderr, "  -write-timeout ")
			writeHelp, _, _ = strings.Cut(writeHelp, "\n  -")
			want := "(default 30s)"
			if noWriteTimeout[name] {
				want = "(default 0s)"
			}
			if !strings.Contains(writeHelp, want) {
				t.Errorf("--write-timeout's help %q lacks %s", writeHelp, want)
			}
		})
	}
}

// TestServeAdminAndTimeouts starts each service that needs no database
// (those that do are tested in their packages) and checks that Go's
// profiles are served on --admin-addr and never on --addr, and that a
// body trickled a byte a second is cut off at --read-timeout.
func TestServeAdminAndTimeouts(t *testing.T) {
	bin := testkit.HlabBinary(t)
	port := func() string { return testkit.FreeAddr(t) }
	for _, tc := range []struct {
		name    string
		args    []string
		unknown int // the public answer for a path the service does not serve
	}{
		{"hello", nil, 404},
		{"work", nil, 404},
		{"backend", nil, 404},
		{"frontend", []string{"--backend", "http://" + closedPort(t) + "/"}, 404},
		{"lb", []string{"--upstreams", closedPort(t)}, 502}, // passed on, to nothing
		{"eventlog", nil, 404},
		{"app", []string{"--mode", "sync", "--eventlog", "http://" + closedPort(t)}, 404},
		{"databus", []string{"--echo", "--grpc-addr", port()}, 404},
		{"grpcfloor", []string{"--grpc-addr", port()}, 404},
		{"kfake", []string{"--kafka-addr", port()}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, admin := port(), port()
			var logs bytes.Buffer
			cmd := exec.Command(bin, append([]string{"serve", tc.name, "--addr", addr, "--admin-addr", admin, "--read-timeout", "1s"}, tc.args...)...)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				<-done
				if t.Failed() {
					t.Logf("the service's log:\n%s", logs.String())
				}
			}()
			client := &http.Client{Timeout: 10 * time.Second}
			get := func(url string) (int, error) {
				resp, err := client.Get(url)
				if err != nil {
					return 0, err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode, nil
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, err := get("http://" + addr + "/healthz")
				if err == nil && code == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no /healthz after 30 s: %d %v", code, err)
				}
				select {
				case err := <-done:
					done <- err // for the deferred wait
					t.Fatalf("exited before it served: %v", err)
				case <-time.After(50 * time.Millisecond):
				}
			}
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
				if code, err := get("http://" + addr + path); err != nil || code != tc.unknown {
					t.Errorf("public %s = %d %v, want %d", path, code, err, tc.unknown)
				}
			}
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
				if code, err := get("http://" + admin + path); err != nil || code != http.StatusOK {
					t.Errorf("admin %s = %d %v, want 200", path, code, err)
				}
			}
			if _, held, err := servertest.Trickle(addr, "POST", "/events", "application/json", "", 20*time.Second); err != nil {
				t.Error(err)
			} else if held {
				t.Error("the server still holds the connection of a body trickled a byte a second after 20 s (--read-timeout 1s)")
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				done <- err // for the deferred wait
				if err != nil {
					t.Errorf("exit after SIGTERM: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("did not stop within 20 s of SIGTERM")
			}
		})
	}
}

// Every service's flags read back their field, so that Config.Args can
// rebuild its command line: none is an fs.Func, whose value reads "".
func TestServiceFlagsReadBack(t *testing.T) {
	for name, svc := range services {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		svc.run(fs)
		fs.VisitAll(func(f *flag.Flag) {
			// fs.Func's and fs.BoolFunc's values (flag.funcValue, flag.boolFuncValue)
			if typ := fmt.Sprintf("%T", f.Value); strings.Contains(strings.ToLower(typ), "funcvalue") {
				t.Errorf("hlab serve %s --%s is an fs.Func or fs.BoolFunc (%s): Config.Args cannot give it back; bind it to a field (internal/cliflag)", name, f.Name, typ)
			}
		})
	}
}
