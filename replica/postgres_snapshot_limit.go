package replica

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// A snapshot load copies whole tables: many replicas starting at once
// (a rollout, a restarted node, a resync after a server restart) would
// all read every table together. Each load first takes one of a few
// turns, session advisory locks on the connection that copies, so at most
// that many loads run at once whatever the number of replicas; the server
// releases a turn when its session ends, so a replica that dies holding
// one does not keep the others waiting.

// DefaultSnapshotLimit is how many loads may run at once by default:
// more than one, so one slow load does not hold up every other replica,
// and few enough that a rollout does not read every table many times over
// at once.
const DefaultSnapshotLimit = 2

// maxSnapshotLimit bounds PostgresSnapshotLimit: each waiting replica
// tries every turn on each attempt, one query each.
const maxSnapshotLimit = 1000

// How long a replica waits between attempts at a turn: doubling from the
// first to the last, each jittered (half to the whole of it) so replicas
// that started together do not try together.
const (
	snapshotTurnFirstWait = 50 * time.Millisecond
	snapshotTurnLastWait  = time.Second
)

// snapshotTurnTimeout bounds each query that takes or gives back a turn.
const snapshotTurnTimeout = 5 * time.Second

// PostgresSnapshotLimit caps how many replicas of one publication load a
// snapshot at once (default 2; 0 or less: no cap), across processes and
// hosts: before it loads, at start and at every resync, a source takes one of
// n turns, session advisory locks held on the connection that copies until
// the load ends. While all are taken it stays not Ready, its Err wrapping
// ErrSnapshotQueued with how long it has waited, and tries again with
// jittered backoff (50 ms doubling to 1 s). See "Starting many replicas at
// once" in the package doc for the locks' keys and how to size n.
func PostgresSnapshotLimit(n int) PostgresOption {
	return func(c *pgConfig) { c.snapshotLimit = n }
}

func validateSnapshotLimit(n int) error {
	if n > maxSnapshotLimit {
		return fmt.Errorf("replica: a snapshot limit of %d is more than %d; so high a limit limits nothing: give a negative one for no limit", n, maxSnapshotLimit)
	}
	return nil
}

// snapshotTurns is what a source tells of its turns (the metrics
// replica_snapshot_wait_seconds_total and replica_snapshot_loading).
type snapshotTurns struct {
	waited  atomic.Int64 // nanoseconds spent waiting for a turn, all loads
	loading atomic.Bool  // a load is in progress (it has its turn)
}

// snapshotLockKey is the first key of the turns' advisory locks (the
// second is the turn's number): replicas of one publication share the
// turns, and those of another publication, or of another database
// (advisory locks are per database), do not wait for them.
func snapshotLockKey(publication string) int32 {
	h := fnv.New32a()
	h.Write([]byte("replica snapshot " + publication))
	return int32(h.Sum32())
}

// loadSnapshot is snapshot, in one of the snapshot limit's turns.
func (s *PostgresSource) loadSnapshot(ctx context.Context, repl *pgconn.PgConn, conn *pgx.Conn) (pglogrepl.LSN, error) {
	release, err := s.takeSnapshotTurn(ctx, conn)
	if err != nil {
		return 0, err
	}
	defer release()
	return s.snapshot(ctx, repl, conn)
}

// takeSnapshotTurn waits until conn holds one of the limit's turns and
// returns what gives it back.
func (s *PostgresSource) takeSnapshotTurn(ctx context.Context, conn *pgx.Conn) (release func(), err error) {
	n := s.cfg.snapshotLimit
	if n <= 0 {
		s.turns.loading.Store(true)
		return func() { s.turns.loading.Store(false) }, nil
	}
	key := snapshotLockKey(s.cfg.publication)
	began := time.Now()
	defer func() { s.turns.waited.Add(int64(time.Since(began))) }()
	wait := snapshotTurnFirstWait
	first := rand.IntN(n) // replicas that start together try different turns first
	queued := false       // Err says it waits
	for {
		for i := range n {
			turn := int32((first + i) % n)
			ok, err := tryAdvisoryLock(ctx, conn, key, turn)
			if err != nil {
				return nil, fmt.Errorf("take a snapshot turn: %w", err)
			}
			if ok {
				if queued {
					waited := time.Since(began).Round(time.Millisecond)
					s.cfg.logger.Info("replica: snapshot turn taken", "waited", waited, "turn", turn)
					// Err no longer says it waits; never nil here: that
					// would make the tables Ready before they load.
					s.setErr(fmt.Errorf("replica: loading a snapshot, after %s waiting for a turn", waited))
				}
				s.turns.loading.Store(true)
				return func() {
					s.turns.loading.Store(false)
					giveBackTurn(ctx, conn, key, turn)
				}, nil
			}
		}
		waited := time.Since(began).Round(time.Millisecond)
		s.setErr(fmt.Errorf("%w for %s: %d loads of publication %s are running (PostgresSnapshotLimit, the services' --snapshot-limit)",
			ErrSnapshotQueued, waited, n, s.cfg.publication))
		queued = true
		sleep := wait/2 + rand.N(wait/2)
		wait = min(2*wait, snapshotTurnLastWait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(sleep):
		}
	}
}

func tryAdvisoryLock(ctx context.Context, conn *pgx.Conn, key, turn int32) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTurnTimeout)
	defer cancel()
	var ok bool
	err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", key, turn).Scan(&ok)
	return ok, err
}

// giveBackTurn unlocks a turn. If it cannot (the connection broke), the
// server has ended the session and its locks already, or will when the
// caller closes the connection.
func giveBackTurn(ctx context.Context, conn *pgx.Conn, key, turn int32) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTurnTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, $2)", key, turn); err != nil {
		conn.Close(ctx)
	}
}

var (
	snapshotWaitDesc    = prometheus.NewDesc("replica_snapshot_wait_seconds_total", "Time spent waiting for a turn to load a snapshot (PostgresSnapshotLimit): other replicas of the publication were loading theirs.", []string{"source"}, nil)
	snapshotLoadingDesc = prometheus.NewDesc("replica_snapshot_loading", "1 while the source loads a snapshot (it holds a turn); summed over replicas, the loads running at once.", []string{"source"}, nil)
)

// withSnapshotTurns is a source that takes turns to load (PostgresSource).
type withSnapshotTurns interface{ snapshotTurnState() *snapshotTurns }

func (s *PostgresSource) snapshotTurnState() *snapshotTurns { return &s.turns }

func describeSnapshotTurns(ch chan<- *prometheus.Desc, src any) {
	if _, ok := src.(withSnapshotTurns); ok {
		ch <- snapshotWaitDesc
		ch <- snapshotLoadingDesc
	}
}

func collectSnapshotTurns(ch chan<- prometheus.Metric, name string, src any) {
	w, ok := src.(withSnapshotTurns)
	if !ok {
		return
	}
	t := w.snapshotTurnState()
	loading := 0.0
	if t.loading.Load() {
		loading = 1
	}
	ch <- prometheus.MustNewConstMetric(snapshotWaitDesc, prometheus.CounterValue, time.Duration(t.waited.Load()).Seconds(), name)
	ch <- prometheus.MustNewConstMetric(snapshotLoadingDesc, prometheus.GaugeValue, loading, name)
}
