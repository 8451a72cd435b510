package tasks

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Login attempts are limited by token buckets, one per account (its
// normalized email) and one per client address, each holding Burst
// attempts and refilled at Rate a minute. An attempt takes a token from
// the address's bucket first, then from the account's; without one it is
// refused with 429 and Retry-After before any password is hashed. Every
// attempt counts, right or wrong, so a guesser gets Rate guesses a minute
// per account however many addresses it has, and Rate a minute per
// address across accounts. The price: whoever floods an account's login
// keeps its owner out until the flood stops (Retry-After says how long).
//
// The client's address is the connection's peer, or behind the proxies
// of Config.TrustedProxies the address they saw (clientaddr.go). An IPv6
// client is keyed by its /64, which one subscriber usually holds whole.
//
// The buckets live in this process by default (limiter): a cluster of N
// instances behind a balancer then allows N times each limit, since each
// instance counts only the attempts it serves. With Config.LoginLimits
// "postgres" every instance takes from the same buckets, one statement
// per attempt (pgBuckets), and the limits hold for the cluster.

// allowLogin takes a login attempt from the client address's bucket,
// then from the account's, or returns the LimitError to answer. A refused
// address takes nothing from the account: a guesser behind one address
// cannot lock others out of an account faster than its own limit allows.
func (s *Service) allowLogin(r *http.Request, email string) error {
	if ok, wait, err := s.loginsByAddr.allow(r.Context(), s.clientAddr(r)); err != nil || !ok {
		return limited(err, &LimitError{Kind: "too_many_logins", RetryAfter: wait,
			Reason: "too many login attempts from your address: wait the seconds in Retry-After, then try again"})
	}
	if ok, wait, err := s.loginsByAccount.allow(r.Context(), email); err != nil || !ok {
		return limited(err, &LimitError{Kind: "too_many_logins", RetryAfter: wait,
			Reason: "too many login attempts for this account: wait the seconds in Retry-After, then try again"})
	}
	return nil
}

// allowSignup takes a sign-up from the client address's bucket, then from
// the service's, or returns the LimitError to answer; it runs before the
// password is hashed. A refused address takes nothing from the service's
// bucket, so that one address cannot use up everyone's sign-ups faster
// than its own limit allows.
func (s *Service) allowSignup(r *http.Request) error {
	if ok, wait, err := s.signupsByAddr.allow(r.Context(), s.clientAddr(r)); err != nil || !ok {
		return limited(err, &LimitError{Kind: "too_many_signups", RetryAfter: wait,
			Reason: "too many sign-ups from your address: wait the seconds in Retry-After, then try again"})
	}
	if ok, wait, err := s.signups.allow(r.Context(), ""); err != nil || !ok {
		return limited(err, &LimitError{Kind: "too_many_signups", RetryAfter: wait,
			Reason: "this server takes no more sign-ups for now: wait the seconds in Retry-After, then try again"})
	}
	return nil
}

// limited is the error to answer: the buckets' failure, or the limit.
func limited(err error, lim *LimitError) error {
	if err != nil {
		return err
	}
	return lim
}

// buckets is a token bucket per key: in this process (limiter) or in
// Postgres (pgBuckets), as Config.LoginLimits says.
type buckets interface {
	// allow takes a token from key's bucket; without one it returns how
	// long until there is one.
	allow(ctx context.Context, key string) (ok bool, wait time.Duration, err error)
}

// newBuckets returns the buckets of a limit called name (its rows' name
// in Postgres), perMinute tokens a minute and burst at once; a negative
// perMinute is no limit.
func (s *Service) newBuckets(name string, perMinute float64, burst int) buckets {
	if s.cfg.LoginLimits == LimitsPostgres {
		return newPGBuckets(s.store, name, perMinute, burst, s.cfg.RequestTimeout, s.log)
	}
	return newLimiter(perMinute, burst)
}

// limiter is a token bucket per key, in this process. A bucket that has refilled is the
// same as none, so it is forgotten: the keys held are those seen within
// the last Burst/Rate, whatever the number of keys tried.
type limiter struct {
	rate  float64 // tokens a second
	burst float64
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was counted
}

// sweepEvery is how often take forgets the buckets that have refilled.
const sweepEvery = time.Minute

// newLimiter returns a limiter of perMinute tokens a minute and burst at
// once, or nil (no limit) when perMinute is negative.
func newLimiter(perMinute float64, burst int) *limiter {
	if perMinute < 0 {
		return nil
	}
	return &limiter{rate: perMinute / 60, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

func (l *limiter) allow(_ context.Context, key string) (bool, time.Duration, error) {
	ok, wait := l.take(key)
	return ok, wait, nil
}

// take takes a token from key's bucket; without one it returns how long
// until there is one. A nil limiter always has one.
func (l *limiter) take(key string) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	} else {
		b.tokens = l.refilled(b, now)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

func (l *limiter) refilled(b *bucket, now time.Time) float64 {
	if d := now.Sub(b.at); d > 0 {
		return min(l.burst, b.tokens+d.Seconds()*l.rate)
	}
	return b.tokens
}

// sweep forgets the buckets that have refilled by now.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if l.refilled(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	l.lastSweep = now
}
