package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestLoginLimitsAcrossInstances: two instances on one database, a
// guesser's attempts on one account spread over both. With the buckets in
// Postgres the account gets its burst in total, refused after; with the
// buckets in each process (the default) it gets the burst on each, twice
// as many: the per-instance limit the flags' help states. The attempts
// run at once, so that the instances' takes race on the bucket's row.
func TestLoginLimitsAcrossInstances(t *testing.T) {
	const burst = 5
	for _, c := range []struct {
		limits  string
		allowed int
	}{{tasks.LimitsPostgres, burst}, {tasks.LimitsProcess, 2 * burst}} {
		t.Run(c.limits, func(t *testing.T) {
			dsn := newDatabase(t)
			cfg := func(cfg *tasks.Config) {
				cfg.LoginLimits = c.limits
				cfg.LoginAccountBurst = burst
				cfg.LoginAccountRate = 1 // a minute: nothing refills during the test
				cfg.LoginIPRate = -1
			}
			instances := []*env{newEnvOn(t, dsn, cfg), newEnvOn(t, dsn, cfg)}
			instances[0].signup("victim@example.com")
			answers := make([]answer, 4*burst)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() { answers[i] = login(instances[i%2].anon(), "victim@example.com", fmt.Sprintf("guess %d", i)) })
			}
			wg.Wait()
			allowed := 0
			for i, a := range answers {
				switch a.code {
				case http.StatusUnauthorized:
					allowed++
				case http.StatusTooManyRequests:
					checkLimited(t, a, "too_many_logins", 60)
				default:
					t.Fatalf("attempt %d = %s, want 401 or 429", i+1, a)
				}
			}
			if allowed != c.allowed {
				t.Fatalf("%d guesses of %d answered (401) across two instances, want %d", allowed, 4*burst, c.allowed)
			}
		})
	}
}

// TestLoginLimitsBehindTrustedProxy: behind a trusted proxy each client
// has its own address bucket, the address the proxy put in
// X-Forwarded-For; from a peer that is not trusted the header is
// ignored, so a guesser cannot take a fresh bucket by making one up.
func TestLoginLimitsBehindTrustedProxy(t *testing.T) {
	limits := func(trusted ...string) func(*tasks.Config) {
		return func(c *tasks.Config) {
			c.LoginIPBurst = 2
			c.LoginIPRate = 1
			c.LoginAccountRate = -1
			c.TrustedProxies = trusted
		}
	}
	attempt := func(e *env, forwardedFor string) answer {
		return e.anon().do("POST", "/v1/auth/login", map[string]string{"email": "a@example.com", "password": "a guess"}, "X-Forwarded-For", forwardedFor)
	}
	// The test's requests come from loopback: the proxy.
	behind := newEnv(t, limits("127.0.0.0/8", "::1"))
	for range 2 {
		if a := attempt(behind, "198.51.100.1"); a.code != http.StatusUnauthorized {
			t.Fatalf("client 1 behind the trusted proxy = %s, want 401", a)
		}
	}
	checkLimited(t, attempt(behind, "198.51.100.1"), "too_many_logins", 60)
	if a := attempt(behind, "198.51.100.2"); a.code != http.StatusUnauthorized {
		t.Fatalf("client 2 behind the trusted proxy, after client 1 was limited = %s, want 401 (a bucket of its own)", a)
	}

	direct := newEnv(t, limits("10.0.0.0/8"))
	for i := range 2 {
		if a := attempt(direct, fmt.Sprintf("198.51.100.%d", i)); a.code != http.StatusUnauthorized {
			t.Fatalf("attempt %d = %s, want 401", i+1, a)
		}
	}
	checkLimited(t, attempt(direct, "198.51.100.99"), "too_many_logins", 60)
}

// TestNewRefusesBadLimitsAndOutbox: an option given wrong stops New with
// what to give instead, before anything starts.
func TestNewRefusesBadLimitsAndOutbox(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*tasks.Config)
		want   string
	}{
		{"login limits", func(c *tasks.Config) { c.LoginLimits = "redis" }, "give process"},
		{"trusted proxy", func(c *tasks.Config) { c.TrustedProxies = []string{"the balancer"} }, "neither a CIDR"},
		{"outbox without a webhook", func(c *tasks.Config) { c.NotifyOutbox = true }, "give --webhook-url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tasks.Config{DatabaseURL: "postgres://nobody@127.0.0.1:1/none"}
			c.mutate(&cfg)
			_, err := tasks.New(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestPostgresBucketsRefill: a bucket in Postgres refills at its rate, as
// one in the process does: refused with a Retry-After, then taken again
// once a token came back; its row says when it is full, for the sweep.
func TestPostgresBucketsRefill(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) {
		c.LoginLimits = tasks.LimitsPostgres
		c.LoginAccountBurst = 1
		c.LoginAccountRate = 120 // a token every 0.5 s
		c.LoginIPRate = -1
	})
	anon := e.anon()
	if a := login(anon, "refill@example.com", "guess"); a.code != http.StatusUnauthorized {
		t.Fatalf("first attempt = %s, want 401", a)
	}
	checkLimited(t, login(anon, "refill@example.com", "guess"), "too_many_logins", 1)
	var tokens, fullIn float64
	if err := e.db.QueryRow(context.Background(), `SELECT tokens, extract(epoch FROM full_at - at)::float8 FROM rate_buckets WHERE name = 'login_account' AND key = 'refill@example.com'`).Scan(&tokens, &fullIn); err != nil {
		t.Fatal(err)
	}
	if tokens < 0 || tokens >= 1 || fullIn <= 0 || fullIn > 0.5 {
		t.Fatalf("bucket row: %v tokens, full in %v s; want under one token, full within 0.5 s", tokens, fullIn)
	}
	testkit.Eventually(t, 30*time.Second, "a token back", func() bool {
		return login(anon, "refill@example.com", "guess").code == http.StatusUnauthorized
	})
}

// TestPostgresBucketsSweep: a bucket full again is deleted by an
// instance's sweep (the first attempt on a limit starts one), so the
// table holds only the keys seen lately.
func TestPostgresBucketsSweep(t *testing.T) {
	dsn := newDatabase(t)
	cfg := func(c *tasks.Config) { c.LoginLimits = tasks.LimitsPostgres }
	first := newEnvOn(t, dsn, cfg) // migrates
	if _, err := first.db.Exec(context.Background(), `INSERT INTO rate_buckets (name, key, tokens, at, full_at, ok)
		VALUES ('login_account', 'stale@example.com', 0, now() - interval '1 hour', now() - interval '1 minute', true)`); err != nil {
		t.Fatal(err)
	}
	login(first.anon(), "fresh@example.com", "guess")
	testkit.Eventually(t, 30*time.Second, "the full bucket swept", func() bool {
		return first.countWhere("rate_buckets", "key = 'stale@example.com'") == 0
	})
	if n := first.countWhere("rate_buckets", "key = 'fresh@example.com'"); n != 1 {
		t.Fatalf("%d buckets of the account just tried, want 1 (not full: kept)", n)
	}
}

// TestProcessLoginLimitsFlag: --login-limits postgres reaches the
// service: a limited account's bucket is a row of rate_buckets.
func TestProcessLoginLimitsFlag(t *testing.T) {
	e, _ := runProcess(t, "--login-limits", "postgres", "--login-account-burst", "1", "--login-account-rate", "1", "--trusted-proxies", "127.0.0.1")
	db, err := pgxpool.New(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	e.db = db
	anon := e.anon()
	if a := login(anon, "flag@example.com", "guess"); a.code != http.StatusUnauthorized {
		t.Fatalf("first attempt = %s, want 401", a)
	}
	checkLimited(t, login(anon, "flag@example.com", "guess"), "too_many_logins", 60)
	if n := e.countWhere("rate_buckets", "name = 'login_account' AND key = 'flag@example.com'"); n != 1 {
		t.Fatalf("%d rows of the account's bucket, want 1", n)
	}
}
