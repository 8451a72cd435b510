package tasks_test

import (
	"net/http"
	"strconv"
	"syscall"
	"testing"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

func login(c *client, email, password string) answer {
	c.e.t.Helper()
	return c.do("POST", "/v1/auth/login", map[string]string{"email": email, "password": password})
}

// checkLimited checks a 429 of kind with a Retry-After of 1 to max seconds.
func checkLimited(t *testing.T, a answer, kind string, max int) {
	t.Helper()
	if a.code != http.StatusTooManyRequests || a.err.Error != kind || a.err.Reason == "" {
		t.Fatalf("answer %s, want 429 %s with a reason", a, kind)
	}
	if s, err := strconv.Atoi(a.hdr.Get("Retry-After")); err != nil || s < 1 || s > max {
		t.Fatalf("Retry-After %q, want 1 to %d seconds", a.hdr.Get("Retry-After"), max)
	}
}

// Login attempts of one account are limited: past the burst, even the
// right password gets 429 with Retry-After, while other accounts log in.
func TestLoginLimitPerAccount(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) {
		c.LoginAccountBurst = 3
		c.LoginAccountRate = 1 // a minute: nothing refills during the test
	})
	e.signup("alice@example.com")
	e.signup("bob@example.com")
	anon := e.anon()
	for i := range 3 {
		if a := login(anon, "alice@example.com", "a guess"); a.code != http.StatusUnauthorized {
			t.Fatalf("attempt %d = %s, want 401", i+1, a)
		}
	}
	a := login(anon, "ALICE@example.com", "password-of-alice@example.com")
	checkLimited(t, a, "too_many_logins", 60)
	if a := login(anon, "bob@example.com", "password-of-bob@example.com"); a.code != http.StatusOK {
		t.Fatalf("bob's login while alice's account is limited = %s, want 200", a)
	}
	if n := e.metric("tasks_logins_total", map[string]string{"result": "limited"}); n != 1 {
		t.Errorf("tasks_logins_total{result=limited} = %v, want 1", n)
	}
}

// Login attempts from one client address are limited, whichever
// accounts they try.
func TestLoginLimitPerAddress(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) {
		c.LoginIPBurst = 3
		c.LoginIPRate = 1
	})
	e.signup("alice@example.com")
	anon := e.anon()
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if a := login(anon, email, "a guess"); a.code != http.StatusUnauthorized {
			t.Fatalf("attempt as %s = %s, want 401", email, a)
		}
	}
	checkLimited(t, login(anon, "alice@example.com", "password-of-alice@example.com"), "too_many_logins", 60)
}

// TestLowerFileLimit: optimization 6 off keeps the usual 1024 open files,
// and raising it again restores the process's limit.
func TestLowerFileLimit(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &before) })
	soft, hard, err := tasks.LowerFileLimit(tasks.LowFileLimit)
	if err != nil || soft != min(tasks.LowFileLimit, before.Max) || hard != before.Max {
		t.Fatalf("LowerFileLimit = %d, %d, %v; want soft %d, hard %d", soft, hard, err, min(tasks.LowFileLimit, before.Max), before.Max)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil || now.Cur != soft {
		t.Fatalf("limit in force %d (%v), want %d", now.Cur, err, soft)
	}
	if soft, _, err := tasks.RaiseFileLimit(before.Max); err != nil || soft <= tasks.LowFileLimit && before.Max > tasks.LowFileLimit {
		t.Fatalf("RaiseFileLimit after = %d, %v; want the hard limit %d back", soft, err, before.Max)
	}
}
