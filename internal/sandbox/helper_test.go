package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
	"github.com/highload-lab/hlab/internal/testkit"
)

// The test binary doubles as the child processes: with helperEnv set it
// runs one of the helpers below instead of the tests.
const (
	helperEnv = "HLAB_SANDBOX_HELPER"
	markEnv   = "HLAB_SANDBOX_MARK" // file the sleep helper writes on SIGTERM
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(mode string) {
	switch mode {
	case "spin": // one busy core
		runtime.GOMAXPROCS(1)
		fmt.Println("ready")
		x := 0
		for {
			x++
		}
	case "sleep": // exits 0 on SIGTERM, after writing $HLAB_SANDBOX_MARK
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		if f := os.Getenv(markEnv); f != "" {
			_ = os.WriteFile(f, []byte("term"), 0o644)
		}
		os.Exit(0)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		blockForever()
	case "alloc": // touches 200 MiB, 1 MiB at a time
		var keep [][]byte
		for i := 0; i < 200; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
		blockForever()
	case "cgroup": // the first thing it does: report its cgroups
		b, _ := os.ReadFile("/proc/self/cgroup")
		os.Stdout.Write(b)
		fmt.Println("ready")
		blockForever()
	case "fork": // starts a sleeping grandchild in a session of its own
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=ignore-term")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		blockForever()
	case "owner": // a lab that crashes: it starts a child and waits to be killed
		s, err := New()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		p, err := s.Start(context.Background(), Spec{Name: "orphan", Path: os.Args[0], Env: helperEnvFor("sleep")})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var dirs []string
		if p.group != nil {
			dirs = p.group.dirs()
		}
		b, _ := json.Marshal(ownerReport{PID: p.PID(), Dirs: dirs})
		fmt.Println(string(b))
		blockForever()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", mode)
		os.Exit(2)
	}
}

type ownerReport struct {
	PID  int
	Dirs []string
}

// helperEnvFor returns the environment that makes the test binary run
// helper mode.
func helperEnvFor(mode string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			env = append(env, kv)
		}
	}
	// The race runtime sleeps a second at exit by default.
	env = append(env, helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	return append(env, extra...)
}

// eachMechanism runs f with New's sandbox and, when that one has
// cgroups, also with one forced to None, so the /proc-based paths run too.
func eachMechanism(t *testing.T, f func(t *testing.T, s *Sandbox)) {
	s := newSandboxT(t)
	t.Run(string(s.Mechanism()), func(t *testing.T) { f(t, s) })
	if s.Mechanism() != None {
		none := newSandbox(nil, "forced by the test")
		t.Cleanup(func() {
			if err := none.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		t.Run(string(None), func(t *testing.T) { f(t, none) })
	}
}

// helperSpec is a Spec running the test binary in helper mode.
func helperSpec(name, mode string, out *testkit.SyncBuffer) Spec {
	sp := Spec{Name: name, Path: os.Args[0], Env: helperEnvFor(mode)}
	if out != nil {
		sp.Stdout, sp.Stderr = out, out
	}
	return sp
}

// waitOutput waits until out contains s.
func waitOutput(t *testing.T, out *testkit.SyncBuffer, s string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("output %q (have %q)", s, out), func() bool {
		return strings.Contains(out.String(), s)
	})
}

// gone reports whether pid no longer runs (absent, or a zombie nobody
// reaped yet).
func gone(pid int) bool { return !procfs.Alive(pid) }

func newSandboxT(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func requireLimits(t *testing.T, s *Sandbox) {
	t.Helper()
	if s.Mechanism() == None {
		t.Skipf("no CPU/memory limits on this machine: %s", s.Reason())
	}
}

func dirExists(d string) bool {
	_, err := os.Stat(d)
	return err == nil
}

// blockForever parks the helper. A bare select{} would not do: without
// the race detector's goroutines, Go reports "all goroutines are asleep"
// and exits with status 2.
func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}
