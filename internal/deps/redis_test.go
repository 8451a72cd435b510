package deps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/testkit"
)

// TestRedis starts a real redis-server, sets and gets a key over RESP,
// checks that it runs without persistence, and stops it.
func TestRedis(t *testing.T) {
	if _, _, err := FindRedis(); errors.Is(err, ErrRedisNotInstalled) {
		testkit.SkipMissing(t, "redis-server", err)
	}
	sb := testSandbox(t)
	ctx := context.Background()
	start := time.Now()
	r, err := StartRedis(ctx, sb, RedisConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	t.Logf("started %s at %s in %s", r.Kind, r.Addr, time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(r.Kind, "redis ") || r.Version == "" {
		t.Errorf("Kind %q, Version %q", r.Kind, r.Version)
	}

	conn, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	cmd := func(c string) string {
		t.Helper()
		if _, err := conn.Write([]byte(c + "\r\n")); err != nil {
			t.Fatal(err)
		}
		reply, err := readRESP(rd)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	if got := cmd("SET user:1 ann"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	if got := cmd("GET user:1"); got != "ann" {
		t.Fatalf("GET: %q", got)
	}
	if got := cmd("CONFIG GET save"); got != "[save ]" {
		t.Errorf("CONFIG GET save: %q, want no snapshots", got)
	}
	if got := cmd("CONFIG GET appendonly"); got != "[appendonly no]" {
		t.Errorf("CONFIG GET appendonly: %q, want no AOF", got)
	}

	mustStop(t, "redis", r.Proc(), r.Stop)
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := PingRedis(pctx, r.Addr); err == nil {
		t.Fatal("PING answered after Stop")
	}
}

// readRESP reads one reply: a simple string, error, integer or bulk
// string as its text, an array as "[a b ...]".
func readRESP(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		items := make([]string, 0, n)
		for range n {
			it, err := readRESP(rd)
			if err != nil {
				return "", err
			}
			items = append(items, it)
		}
		return "[" + strings.Join(items, " ") + "]", nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
