package tasks_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// serveChildEnv, set, makes the test binary run "hlab serve tasks" with
// its value's lines as the flags, instead of the tests: a service in a
// process of its own, which a test can SIGKILL.
const serveChildEnv = "HLAB_TEST_TASKS_SERVE"

// runServeChild serves on loopback listeners of its own, prints "ADDR
// host:port" and "ADMIN host:port", and runs until SIGTERM (or a kill).
func runServeChild(args string) int {
	o, srv, err := serveFlags("", strings.Split(args, "\n"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("ADDR %s\nADMIN %s\n", ln.Addr(), admin.Addr())
	srv.Listener, srv.AdminListener = ln, admin
	srv.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := tasks.Serve(ctx, srv, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// serveFlags parses the flags of "hlab serve tasks": args after, on dsn
// ("" when args give it), the test's cheap bcrypt cost and text logs.
func serveFlags(dsn string, args []string) (tasks.Options, server.Config, error) {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	var (
		o   tasks.Options
		srv server.Config
	)
	srv.RegisterFlags(fs)
	o.RegisterFlags(fs)
	base := []string{"--bcrypt-cost", "4", "--log-format", "text"}
	if dsn != "" {
		base = append(base, "--dsn", dsn)
	}
	err := fs.Parse(append(base, args...))
	return o, srv, err
}

// child is "hlab serve tasks" running in a process of its own.
type child struct {
	cmd          *exec.Cmd
	url, admin   string // http://host:port of the service and of its admin address
	exited, done chan struct{}
}

// startChild starts the service on dsn with args (beyond --dsn and a
// cheap bcrypt cost) in a child process, and waits until it is healthy.
// The test's end kills it if it still runs.
func startChild(t *testing.T, dsn string, args ...string) *child {
	t.Helper()
	args = append([]string{"--dsn", dsn}, args...)
	cmd, out := testkit.StartSelf(t, serveChildEnv+"="+strings.Join(args, "\n"))
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exited
	})
	lines := bufio.NewScanner(out)
	for (c.url == "" || c.admin == "") && lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "ADDR "); ok {
			c.url = "http://" + addr
		}
		if addr, ok := strings.CutPrefix(lines.Text(), "ADMIN "); ok {
			c.admin = "http://" + addr
		}
	}
	if c.url == "" || c.admin == "" {
		t.Fatal("the service's child process printed no addresses")
	}
	go io.Copy(io.Discard, out)
	testkit.Healthy(t, 30*time.Second, c.url+"/healthz")
	return c
}

// kill ends the child with SIGKILL, as a crash or the OOM killer would:
// nothing of the process runs after it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the service's process still runs 30 s after SIGKILL")
	}
}
