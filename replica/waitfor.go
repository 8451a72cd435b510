package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Querier is what PostgresWritePosition reads through: a *pgx.Conn, a
// *pgxpool.Pool or a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgresWritePosition returns the server's WAL insert position: every
// transaction that committed before the call lies before it, so a
// PostgresSource whose WaitFor it returns for shows their changes. Call it
// after the commit, on the same connection, pool or session that wrote
// (a later statement of the same session sees its own commit).
//
// It reads pg_current_wal_insert_lsn(), not pg_current_wal_lsn(): with
// synchronous_commit off, a commit returns before its record is written,
// so the written position can stop short of it. An insert position at
// the start of a WAL page points past the page's header, which no record
// ever ends at; it is moved back to the page's start, or a replica would
// wait for the next record written by anyone.
func PostgresWritePosition(ctx context.Context, db Querier) (pglogrepl.LSN, error) {
	var (
		lsn           pglogrepl.LSN
		page, segment int64
	)
	err := db.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, current_setting('wal_block_size')::bigint,
		pg_size_bytes(current_setting('wal_segment_size'))`).Scan(&lsn, &page, &segment)
	if err != nil {
		return 0, fmt.Errorf("replica: read the WAL insert position: %w", err)
	}
	return pastPageHeader(lsn, page, segment), nil
}

// WAL page header sizes (PostgreSQL's SizeOfXLogShortPHD and
// SizeOfXLogLongPHD, the latter on a segment's first page).
const (
	walShortPageHeader = 24
	walLongPageHeader  = 40
)

// pastPageHeader moves an insert position that points just past a WAL
// page header back to the page's start: the end of the record before it.
func pastPageHeader(lsn pglogrepl.LSN, page, segment int64) pglogrepl.LSN {
	switch {
	case segment > 0 && uint64(lsn)%uint64(segment) == walLongPageHeader:
		return lsn - walLongPageHeader
	case page > 0 && uint64(lsn)%uint64(page) == walShortPageHeader:
		return lsn - walShortPageHeader
	}
	return lsn
}

// WaitFor returns once every change to the source's tables that
// committed before position is visible in them and the tables are Ready
// (AppliedLSN has reached position). It is how a service reads its own
// writes: commit, read PostgresWritePosition, then WaitFor it before
// reading the tables. It returns ctx's error if ctx ends first (wrapped
// with the source's Err when the stream is down), and, for a position not
// reached when Run returned, the error Run ended with, or
// ErrSourceStopped.
//
// It does not poll: the applier wakes waiters when the position moves.
// While one waits for a position the source has not reached, the source
// asks the server for a keepalive at once rather than at its next
// status interval. The server sends a change only once its WAL is
// flushed: with synchronous_commit=off, up to 3 x wal_writer_delay after
// the commit.
func (s *PostgresSource) WaitFor(ctx context.Context, position pglogrepl.LSN) error {
	asked := false
	for {
		// Take the channel before checking, so an advance between the
		// check and the wait is not missed.
		advanced := s.progress.next()
		if s.caughtUpTo(position) {
			return nil
		}
		select {
		case <-s.stopped:
			return s.stopErr()
		default:
		}
		if !asked {
			asked = true
			s.progress.askServer()
		}
		select {
		case <-advanced:
		case <-s.stopped:
			return s.stopErr()
		case <-ctx.Done():
			if err := s.Err(); err != nil {
				return fmt.Errorf("%w; replica at %s, waiting for %s: %w", ctx.Err(), s.AppliedLSN(), position, err)
			}
			return fmt.Errorf("%w; replica at %s, waiting for %s", ctx.Err(), s.AppliedLSN(), position)
		}
	}
}

func (s *PostgresSource) caughtUpTo(position pglogrepl.LSN) bool {
	return s.current.Load() && s.AppliedLSN() >= position
}

func (s *PostgresSource) stopErr() error {
	if s.runErr != nil {
		return s.runErr
	}
	return ErrSourceStopped
}

// progress wakes WaitFor's callers when the source's position or
// readiness changes, and passes their requests for a keepalive to the
// stream. With nobody waiting, an advance costs one atomic swap.
type progress struct {
	// advanced is closed at the next change; nil while nobody waits.
	advanced atomic.Pointer[chan struct{}]
	// ask: a waiter is behind, so the stream should ask the server for a
	// keepalive now (a status update with reply requested).
	ask atomic.Bool
	mu  sync.Mutex
	// interrupt ends the stream's current wait for a message, so that it
	// sends the request without waiting for the next message.
	interrupt context.CancelFunc
}

// changed wakes every waiter.
func (p *progress) changed() {
	if ch := p.advanced.Swap(nil); ch != nil {
		close(*ch)
	}
}

// next returns a channel closed at the next change.
func (p *progress) next() <-chan struct{} {
	for {
		if ch := p.advanced.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if p.advanced.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// askServer has the stream ask the server for a keepalive. Requests
// made before the stream takes one are one request: a thousand waiters
// arriving at once interrupt the stream once.
func (p *progress) askServer() {
	if p.ask.Swap(true) {
		return
	}
	p.mu.Lock()
	if p.interrupt != nil {
		p.interrupt()
	}
	p.mu.Unlock()
}

// receiving registers how to interrupt the stream's wait for a message
// (nil once it has one). A request made before it interrupts at once.
func (p *progress) receiving(interrupt context.CancelFunc) {
	p.mu.Lock()
	p.interrupt = interrupt
	p.mu.Unlock()
	if interrupt != nil && p.ask.Load() {
		interrupt()
	}
}

// asked reports, once, whether a waiter asked for a keepalive.
func (p *progress) asked() bool { return p.ask.Load() && p.ask.Swap(false) }
