package deps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// ErrRedisNotInstalled is returned by FindRedis and StartRedis when no
// redis-server binary is found.
var ErrRedisNotInstalled = errors.New("deps: redis-server is not installed (install it with 'apt-get install -y redis-server', or run 'make deps')")

// FindRedis returns the path of redis-server and its version (e.g. "7.0.15").
func FindRedis() (path, version string, err error) {
	return program{
		name: "redis-server", places: []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"},
		missing: ErrRedisNotInstalled,
		// "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=..."
		versionArgs: []string{"--version"}, version: regexp.MustCompile(`v=(\S+)`),
	}.find()
}

// RedisConfig is what StartRedis needs; the zero value starts a
// throwaway server with no persistence.
type RedisConfig struct {
	// Dir is the server's working directory, with its log (redis.log).
	// "" = a temporary directory that Stop removes.
	Dir      string
	CPU      float64 // sandbox CPU quota (fraction of a core); 0 = none
	MemoryMB int     // sandbox memory limit; 0 = none
	// Args are extra server arguments, e.g. {"--maxmemory", "100mb"},
	// applied after the defaults.
	Args []string
	// StartTimeout bounds the wait for the first PONG (default 10 s).
	StartTimeout time.Duration
	// Port is the port to listen on; 0 = a free one.
	Port int
}

// Redis is a running redis-server on 127.0.0.1, without persistence
// (--save "" --appendonly no): a cache, as the reports ran it.
type Redis struct {
	Kind    string // "redis 7.0.15", for a run's environment record
	Version string
	Addr    string // 127.0.0.1:port
	Dir     string
	Args    []string // the server's arguments, for a run's environment record

	node *serverNode
}

// StartRedis starts redis-server under sb and returns once it answers
// PING. ctx bounds its life as with sandbox.Start, and the wait.
func StartRedis(ctx context.Context, sb *sandbox.Sandbox, cfg RedisConfig) (*Redis, error) {
	if sb == nil {
		return nil, errors.New("deps: StartRedis needs a sandbox to run the server in")
	}
	path, version, err := FindRedis()
	if err != nil {
		return nil, err
	}
	defaults.Positive(&cfg.StartTimeout, 10*time.Second)
	node, err := newServerNode(ctx, sb, "redis", cfg.Dir, "hlab-redis-", nil, false, 5*time.Second, nil)
	if err != nil {
		return nil, err
	}
	node.stdout = "redis.log" // --logfile "": its log is its stdout
	r := &Redis{Kind: "redis " + version, Version: version, Dir: node.dir, node: node}
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		return awaitRedis(ctx, r.Addr, cfg.StartTimeout, exited)
	}
	err = onPorts(ctx, cfg.Port, 1, func(ports []int) error {
		port := ports[0]
		r.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		r.Args = append([]string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", r.Dir, "--logfile", "",
		}, cfg.Args...)
		node.spec = sandbox.Spec{
			Name: "redis", Path: path, Args: r.Args, Dir: r.Dir,
			CPU: cfg.CPU, MemoryMB: cfg.MemoryMB,
		}
		return node.startServer(ctx)
	})
	if err != nil {
		node.removeDir()
		return nil, err
	}
	return r, nil
}

// PingRedis sends PING to the server at addr and expects PONG.
func PingRedis(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line) // e.g. -LOADING while it loads a dump
	}
	return nil
}

// awaitRedis pings addr until it answers PONG, ctx ends, or timeout
// passes. exited, when non-nil, aborts the wait early.
func awaitRedis(ctx context.Context, addr string, timeout time.Duration, exited <-chan struct{}) error {
	return awaitReady(ctx, "redis at "+addr, "did not answer PING", timeout, 20*time.Millisecond, exited, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return PingRedis(ctx, addr)
	})
}

// Proc returns the server's process (nil after Stop).
func (r *Redis) Proc() *sandbox.Process { return r.node.process() }

// Stop stops the server (SIGTERM: with no persistence it exits at once)
// and removes a temporary Dir. It is idempotent.
func (r *Redis) Stop() error { return r.node.stop(r.node.removeDir) }
