package tasks_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// A flood of sign-ups from one address, as fast as it can send them, is
// refused before any password is hashed once past its burst: it creates
// no more accounts, and logins, which share the bcrypt slots, still
// answer within the request timeout.
func TestSignupFloodLeavesLoginsAlone(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) {
		c.BcryptCost = 10                  // the default: a flood must cost real time
		c.RequestTimeout = 5 * time.Second // a login is one bcrypt at cost 10, which -race and a busy machine stretch past a second
		c.LoginIPRate = -1                 // the logins below come from the same address
		c.SignupIPRate = 1                 // a minute: nothing refills while the logins take their seconds
	})
	e.signup("ada@example.com")
	const flood = 100
	var wg sync.WaitGroup
	var limited, created atomic.Int32
	for i := range flood {
		wg.Go(func() {
			a := e.anon().do("POST", "/v1/auth/signup", map[string]string{"email": fmt.Sprintf("flood-%d@example.com", i), "password": "password of the flood"})
			switch a.code {
			case http.StatusTooManyRequests:
				limited.Add(1)
			case http.StatusCreated:
				created.Add(1)
			}
		})
	}
	logins := make([]answer, 5)
	for i := range logins {
		logins[i] = login(e.anon(), "ada@example.com", "password-of-ada@example.com")
	}
	wg.Wait()
	for i, a := range logins {
		if a.code != http.StatusOK {
			t.Errorf("login %d during the flood: %s; want 200", i, a)
		}
	}
	if n := e.count("users"); n > tasks.DefaultSignupIPBurst {
		t.Errorf("%d accounts after the flood; want at most the burst, %d", n, tasks.DefaultSignupIPBurst)
	}
	if got := e.metric("tasks_signups_limited_total", nil); got != float64(limited.Load()) || limited.Load() < flood-tasks.DefaultSignupIPBurst {
		t.Errorf("%d sign-ups limited (metric %v), %d created; want all but the burst limited", limited.Load(), got, created.Load())
	}
	a := e.anon().do("POST", "/v1/auth/signup", map[string]string{"email": "late@example.com", "password": "password of the late"})
	checkLimited(t, a, "too_many_signups", 60)
}

// The service's own sign-up bucket holds for every address together.
func TestSignupLimitOnTheService(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) {
		c.SignupIPRate = -1
		c.SignupBurst = 3
		c.SignupRate = 1
	})
	for i := range 3 {
		e.signup(fmt.Sprintf("u%d@example.com", i))
	}
	a := e.anon().do("POST", "/v1/auth/signup", map[string]string{"email": "u3@example.com", "password": "password of u3"})
	checkLimited(t, a, "too_many_signups", 60)
	if !strings.Contains(a.err.Reason, "this server") {
		t.Errorf("reason %q: want it to say the server, not the address, is at its limit", a.err.Reason)
	}
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
