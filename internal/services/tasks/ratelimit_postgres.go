package tasks

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Where the login and sign-up buckets live (Config.LoginLimits).
const (
	// LimitsProcess keeps them in each process: N instances allow N
	// times each limit. The default: no database round trip per attempt,
	// and one instance (the report's setup) needs no more.
	LimitsProcess = "process"
	// LimitsPostgres shares them through the rate_buckets table, one
	// statement per attempt: the limits hold for the whole cluster.
	LimitsPostgres = "postgres"
)

// pgBuckets is a token bucket per key in Postgres, shared by every
// instance on the database: the same arithmetic as limiter, done by one
// upsert that locks the bucket's row, so that attempts on any instance
// count against each other exactly. Rows full again are swept.
type pgBuckets struct {
	store   *store
	name    string  // the limit, rows' name
	rate    float64 // tokens a second
	burst   float64
	timeout time.Duration
	log     *slog.Logger

	nextSweep atomic.Int64 // unix nanoseconds
	sweeping  atomic.Bool
}

// newPGBuckets returns the buckets of the limit name, or nil (no limit)
// when perMinute is negative.
func newPGBuckets(st *store, name string, perMinute float64, burst int, timeout time.Duration, log *slog.Logger) *pgBuckets {
	if perMinute < 0 {
		return nil
	}
	return &pgBuckets{store: st, name: name, rate: perMinute / 60, burst: float64(burst), timeout: timeout, log: log}
}

// takeBucket takes a token from a bucket ($1 name, $2 key; $3 burst,
// $4 tokens a second): a new bucket starts full, less this token; an
// existing one is refilled by the time since it was counted (never
// negative: a transaction that started before the last one counted adds
// nothing), then gives a token if it has one. ok says whether it did;
// tokens, when it did not, how far it is from one. full_at, when it is
// full again, lets the sweep find it.
const takeBucket = `INSERT INTO rate_buckets AS b (name, key, tokens, at, full_at, ok)
	VALUES ($1, $2, $3::float8 - 1, now(), now() + make_interval(secs => 1 / $4::float8), true)
	ON CONFLICT (name, key) DO UPDATE SET (ok, tokens, at, full_at) = (
		SELECT r >= 1, r - took, at, at + make_interval(secs => ($3::float8 - (r - took)) / $4::float8)
		FROM (SELECT r, CASE WHEN r >= 1 THEN 1 ELSE 0 END AS took, at FROM (
			SELECT least($3::float8, b.tokens + greatest(0, extract(epoch FROM now() - b.at)::float8) * $4::float8) AS r,
				greatest(now(), b.at) AS at) refill) took)
	RETURNING ok, tokens`

func (p *pgBuckets) allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if p == nil {
		return true, 0, nil
	}
	p.maybeSweep()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var ok bool
	var tokens float64
	err := p.store.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, takeBucket, p.name, key, p.burst, p.rate).Scan(&ok, &tokens)
	})
	if err != nil || ok {
		return ok, 0, err
	}
	return false, time.Duration((1 - tokens) / p.rate * float64(time.Second)), nil
}

// maybeSweep deletes, once every sweepEvery on each instance and in the
// background, the limit's buckets that are full again: the rows held are
// those of keys seen within the last Burst/Rate.
func (p *pgBuckets) maybeSweep() {
	now := time.Now().UnixNano()
	next := p.nextSweep.Load()
	if now < next || !p.nextSweep.CompareAndSwap(next, now+int64(sweepEvery)) || !p.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*p.timeout)
		defer cancel()
		err := p.store.read(ctx, func(q dbtx) error {
			_, err := q.Exec(ctx, `DELETE FROM rate_buckets WHERE name = $1 AND full_at <= now()`, p.name)
			return err
		})
		if err != nil {
			p.log.Warn("login limits: cannot sweep the full buckets", "limit", p.name, "err", err)
		}
	}()
}
