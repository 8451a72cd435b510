package tasks

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool hands out database connections. The optimized one is pgxpool with
// explicit limits; the other behaves like database/sql with no limits set.
type pool interface {
	// acquire returns a connection and the function that gives it back.
	acquire(ctx context.Context) (*pgx.Conn, func(), error)
	stats() poolStats
	close()
}

type poolStats struct {
	total, idle, inUse, max int64 // max 0: unlimited
	acquires                int64 // connections handed out
	dials                   int64 // connections opened
	waits                   int64 // acquires that had to wait (bounded) or dial (unbounded)
	waitSeconds             float64
}

// boundedPool is pgxpool with report C's optimization 1: max and min
// connections, idle time and lifetime.
type boundedPool struct{ p *pgxpool.Pool }

func newBoundedPool(ctx context.Context, cfg *Config, tracer pgx.QueryTracer) (*boundedPool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("tasks: database URL: %w", err)
	}
	pc.MaxConns = cfg.MaxConns
	pc.MinConns = cfg.MinConns
	pc.MaxConnIdleTime = cfg.MaxConnIdleTime
	pc.MaxConnLifetime = cfg.MaxConnLifetime
	// Spread reconnections so that all connections do not expire at once.
	pc.MaxConnLifetimeJitter = cfg.MaxConnLifetime / 10
	pc.ConnConfig.Tracer = tracer
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("tasks: database pool: %w", err)
	}
	return &boundedPool{p: p}, nil
}

func (b *boundedPool) acquire(ctx context.Context) (*pgx.Conn, func(), error) {
	c, err := b.p.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.Conn(), c.Release, nil
}

func (b *boundedPool) stats() poolStats {
	s := b.p.Stat()
	return poolStats{
		total: int64(s.TotalConns()), idle: int64(s.IdleConns()), inUse: int64(s.AcquiredConns()), max: int64(s.MaxConns()),
		acquires: s.AcquireCount(), dials: s.NewConnsCount(), waits: s.EmptyAcquireCount(),
		waitSeconds: s.EmptyAcquireWaitTime().Seconds(),
	}
}

func (b *boundedPool) close() { b.p.Close() }

// unboundedPool is what an ORM on database/sql gets when nobody sets pool
// limits (MaxOpenConns 0 = unlimited, MaxIdleConns 2, no idle time or
// lifetime): every acquire beyond the 2 idle connections dials a new one,
// and every release beyond 2 idle closes one. Deopt.NoPoolLimits.
type unboundedPool struct {
	cfg *pgx.ConnConfig

	mu   sync.Mutex
	idle []*pgx.Conn

	open, inUse, acquires, dials atomic.Int64
	dialNanos                    atomic.Int64
}

func newUnboundedPool(cfg *Config, tracer pgx.QueryTracer) (*unboundedPool, error) {
	cc, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("tasks: database URL: %w", err)
	}
	cc.Tracer = tracer
	return &unboundedPool{cfg: cc}, nil
}

func (u *unboundedPool) acquire(ctx context.Context) (*pgx.Conn, func(), error) {
	u.acquires.Add(1)
	u.mu.Lock()
	var c *pgx.Conn
	if n := len(u.idle); n > 0 {
		c = u.idle[n-1]
		u.idle = u.idle[:n-1]
	}
	u.mu.Unlock()
	if c == nil {
		start := time.Now()
		var err error
		c, err = pgx.ConnectConfig(ctx, u.cfg)
		u.dialNanos.Add(int64(time.Since(start)))
		if err != nil {
			return nil, nil, err
		}
		u.dials.Add(1)
		u.open.Add(1)
	}
	u.inUse.Add(1)
	return c, func() { u.release(c) }, nil
}

func (u *unboundedPool) release(c *pgx.Conn) {
	u.inUse.Add(-1)
	if !c.IsClosed() && c.PgConn().TxStatus() == 'I' {
		u.mu.Lock()
		if len(u.idle) < unboundedMaxIdle {
			u.idle = append(u.idle, c)
			u.mu.Unlock()
			return
		}
		u.mu.Unlock()
	}
	u.open.Add(-1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.Close(ctx)
	cancel()
}

func (u *unboundedPool) stats() poolStats {
	u.mu.Lock()
	idle := int64(len(u.idle))
	u.mu.Unlock()
	return poolStats{
		total: u.open.Load(), idle: idle, inUse: u.inUse.Load(),
		acquires: u.acquires.Load(), dials: u.dials.Load(), waits: u.dials.Load(),
		waitSeconds: time.Duration(u.dialNanos.Load()).Seconds(),
	}
}

func (u *unboundedPool) close() {
	u.mu.Lock()
	idle := u.idle
	u.idle = nil
	u.mu.Unlock()
	for _, c := range idle {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Close(ctx)
		cancel()
	}
}
