package tasks_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server/servertest"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// runProcess runs "hlab serve tasks" (tasks.Serve) with args on a fresh database, on
// loopback listeners of its own, until the test ends. It returns an env
// whose srv is only the service's URL, and the admin address's URL.
func runProcess(t *testing.T, args ...string) (e *env, adminURL string) {
	t.Helper()
	dsn := newDatabase(t)
	o, srv, err := serveFlags(dsn, args)
	if err != nil {
		t.Fatal(err)
	}
	ln, admin := testkit.Listen(t), testkit.Listen(t)
	srv.Listener, srv.AdminListener, srv.Logger = ln, admin, slog.New(slog.NewTextHandler(io.Discard, nil))
	testkit.Background(t, "Serve", func(ctx context.Context) error { return tasks.Serve(ctx, srv, o) })
	e = &env{t: t, srv: &httptest.Server{URL: "http://" + ln.Addr().String()}, dsn: dsn, admin: "http://" + admin.Addr().String()}
	testkit.Healthy(t, 15*time.Second, e.srv.URL+"/healthz")
	return e, e.admin
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProcessAdminAddr: the profiles, whose /cmdline shows the flags, and
// the metrics are on --admin-addr only; --public-metrics puts the metrics
// on the service's address, where the lab scrapes them.
func TestProcessAdminAddr(t *testing.T) {
	e, admin := runProcess(t)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/metrics"} {
		if code, _ := get(t, e.srv.URL+path); code != http.StatusNotFound {
			t.Errorf("public %s = %d, want 404", path, code)
		}
		if code, _ := get(t, admin+path); code != http.StatusOK {
			t.Errorf("admin %s = %d, want 200", path, code)
		}
	}
	e, _ = runProcess(t, "--public-metrics")
	if code, _ := get(t, e.srv.URL+"/metrics"); code != http.StatusOK {
		t.Errorf("public /metrics with --public-metrics = %d, want 200", code)
	}
}

// TestProcessWebSocketOutlivesWriteTimeout: the write timeout bounds API
// answers, not a WebSocket, which lives as long as its user keeps it.
func TestProcessWebSocketOutlivesWriteTimeout(t *testing.T) {
	const writeTimeout = time.Second
	e, _ := runProcess(t, "--write-timeout", writeTimeout.String())
	alice := e.signup("alice@example.com")
	ws := alice.dialWS(t, false)
	time.Sleep(2 * writeTimeout) // the subject: a socket older than the write timeout
	task := alice.createTask(map[string]any{"title": "after the write timeout"})
	if ev := readEvent(t, ws); ev.TaskID != task.ID || ev.Type != tasks.EventCreated {
		t.Fatalf("event %+v, want the creation of task %d", ev, task.ID)
	}
}

// TestProcessLimitFlags: the limits' flags reach the service, and 0 turns
// a limit off.
func TestProcessLimitFlags(t *testing.T) {
	e, _ := runProcess(t, "--max-websockets-per-user", "1",
		"--login-ip-burst", "1", "--login-ip-rate", "0", // off: the burst does not matter
		"--login-account-burst", "1", "--login-account-rate", "1")
	alice := e.signup("alice@example.com")
	alice.dialWS(t, false)
	if _, resp, err := dialAs(t, e, alice.token); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second socket with --max-websockets-per-user 1: %v %v, want 429", err, resp)
	}
	anon := e.anon()
	if a := login(anon, "alice@example.com", "password-of-alice@example.com"); a.code != http.StatusOK {
		t.Fatalf("first login = %s, want 200", a)
	}
	if a := login(anon, "bob@example.com", "password-of-bob"); a.code != http.StatusUnauthorized {
		t.Fatalf("another account's login with --login-ip-rate 0 = %s, want 401 (no limit per address)", a)
	}
	checkLimited(t, login(anon, "alice@example.com", "password-of-alice@example.com"), "too_many_logins", 60)
}

// TestProcessSlowBody: a body trickled a byte a second is cut off at
// --read-timeout with a 408 body_timeout, and its connection closed,
// instead of holding a handler as long as the client likes.
func TestProcessSlowBody(t *testing.T) {
	e, _ := runProcess(t, "--read-timeout", "1s")
	answer, held, err := servertest.Trickle(strings.TrimPrefix(e.srv.URL, "http://"), "POST", "/v1/auth/signup", "application/json", "{", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatal("the service still holds the connection of a body trickled a byte a second after 20 s (--read-timeout 1s)")
	}
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 408 ")) || !bytes.Contains(answer, []byte(`"error":"body_timeout"`)) {
		t.Fatalf("answer %.200q, want 408 body_timeout", answer)
	}
}

// TestProcessOptimizationFlags: optimizations 2 and 6 switch off by their
// flags, come back from Options.Args, and a value that is not a boolean is
// refused with what to give.
func TestProcessOptimizationFlags(t *testing.T) {
	parse := func(args ...string) (tasks.Options, error) {
		var o tasks.Options
		fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.RegisterFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	if err != nil || o.Deopt.UncappedTelemetry || o.Deopt.KeepFileLimit {
		t.Fatalf("defaults: %+v, %v; want both optimizations on", o.Deopt, err)
	}
	o, err = parse("--telemetry-cap=false", "--raise-file-limit=false")
	if err != nil || !o.Deopt.UncappedTelemetry || !o.Deopt.KeepFileLimit {
		t.Fatalf("switched off: %+v, %v; want both off", o.Deopt, err)
	}
	args := tasks.Options{Config: tasks.Config{Deopt: tasks.Deopt{UncappedTelemetry: true, KeepFileLimit: true}}}.Command().Args
	if strings.Join(args, " ") != "--raise-file-limit=false --telemetry-cap=false" {
		t.Fatalf("Args = %q, want both flags false", args)
	}
	for _, name := range []string{"telemetry-cap", "raise-file-limit"} {
		if _, err := parse("--" + name + "=sometimes"); err == nil || !strings.Contains(err.Error(), "give true or false") {
			t.Errorf("--%s=sometimes: %v, want a refusal saying to give true or false", name, err)
		}
	}
}
