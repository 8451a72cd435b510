package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The replication slot's life (see "Replication slots and disk" in the
// package doc): a source creates its slot when it loads, resumes from it
// after every reconnect while it runs, and drops it when Run returns.
// Whether the slot bearing its name is still its own is checked on every
// reconnect, since the name is all that ties them.

// slotState is a slot's row in pg_replication_slots.
type slotState struct {
	exists bool
	// activePID is the backend streaming from it (0: none).
	activePID uint32
	// confirmed is confirmed_flush_lsn: what its consumer confirmed, or
	// its consistent point if nothing was. It moves only on the
	// consumer's feedback, so a slot this source made is never past what
	// this source confirmed, and one made by anyone after this source's
	// last connection is (making a logical slot writes WAL).
	confirmed pglogrepl.LSN
	// ourDB is whether the slot is a logical one on the database the
	// source follows (slot names are the whole cluster's).
	ourDB bool
	// invalid says why the server invalidated it ("" when it did not):
	// wal_status 'lost' (max_slot_wal_keep_size), or on newer servers
	// conflicting / invalidation_reason.
	invalid string
}

// inspectSlot reads the slot's state. The newer columns are read through
// to_jsonb so the query runs on any server version from 13 on.
func (s *PostgresSource) inspectSlot(ctx context.Context, conn *pgx.Conn) (slotState, error) {
	var (
		st                          slotState
		pid                         *int32
		confirmed, wal, conflicting *string
		reason                      *string
	)
	err := conn.QueryRow(ctx, `SELECT active_pid, confirmed_flush_lsn::text, coalesce(database = current_database(), false), wal_status,
			to_jsonb(s) ->> 'conflicting', to_jsonb(s) ->> 'invalidation_reason'
		FROM pg_replication_slots s WHERE slot_name = $1`, s.cfg.slot).
		Scan(&pid, &confirmed, &st.ourDB, &wal, &conflicting, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read slot %s: %w", s.cfg.slot, err)
	}
	st.exists = true
	if pid != nil {
		st.activePID = uint32(*pid)
	}
	if confirmed != nil {
		if st.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return st, fmt.Errorf("slot %s: confirmed_flush_lsn %q: %w", s.cfg.slot, *confirmed, err)
		}
	}
	switch {
	case reason != nil:
		st.invalid = *reason
	case conflicting != nil && *conflicting == "true":
		st.invalid = "conflicting with recovery"
	case wal != nil && *wal == "lost":
		st.invalid = "wal_status lost: it fell more than max_slot_wal_keep_size behind"
	}
	return st, nil
}

// checkResume decides whether the slot is the one this source made and
// can resume from. When the slot is gone or invalidated it marks the
// tables for a resync (s.loaded = false), counted and logged; when it is
// someone else's it returns ErrSlotInUse.
func (s *PostgresSource) checkResume(ctx context.Context, conn *pgx.Conn, st slotState) error {
	if !st.exists {
		s.resync(ResyncSlotDropped, "the replication slot is gone")
		return nil
	}
	if err := s.foreign(ctx, conn, st); err != nil {
		return err
	}
	if st.confirmed > s.confirmed {
		s.ownSlot = false
		return fmt.Errorf("slot %s was made anew by another replica while this one reconnected (it starts at %s; this one had confirmed %s): %w",
			s.cfg.slot, st.confirmed, s.confirmed, ErrSlotInUse)
	}
	if st.invalid != "" {
		s.resync(ResyncSlotInvalidated, "the server invalidated the replication slot ("+st.invalid+")")
	}
	return nil
}

// foreign returns ErrSlotInUse when another connection holds the slot or
// it is another database's. A slot held by this source's own previous
// connection (its walsender outlives a connection the client gave up on
// until wal_sender_timeout) is freed by ending that backend, and the
// session tried again.
func (s *PostgresSource) foreign(ctx context.Context, conn *pgx.Conn, st slotState) error {
	if !st.ourDB {
		return fmt.Errorf("slot %s is a physical slot or another database's: %w", s.cfg.slot, ErrSlotInUse)
	}
	if st.activePID == 0 {
		return nil
	}
	prev := s.walsender
	if st.activePID != prev {
		return fmt.Errorf("slot %s is streaming to another connection (backend pid %d): %w", s.cfg.slot, st.activePID, ErrSlotInUse)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(prev)); err != nil {
		return fmt.Errorf("end this replica's previous replication connection (pid %d), which still holds slot %s: %w", prev, s.cfg.slot, err)
	}
	return fmt.Errorf("slot %s was still held by this replica's previous connection (pid %d): ended it", s.cfg.slot, prev)
}

// resync marks every table for a reload from a new snapshot.
func (s *PostgresSource) resync(reason, why string) {
	s.cfg.logger.Warn("replica: resyncing every table from a new snapshot", "slot", s.cfg.slot, "reason", reason, "why", why)
	s.resyncs.add(reason)
	s.loaded = false
}

// clearSlot makes way for a new slot before a load: it drops a slot of
// this name that nobody streams from. Before the first load that is one
// left by a replica that stopped without dropping it (it crashed or was
// killed): a new process cannot resume from it, its tables are empty. It
// may also be the slot of another replica that is reconnecting; that one
// then finds its slot made anew and says so (ErrSlotInUse) instead of
// resuming from this one's.
func (s *PostgresSource) clearSlot(ctx context.Context, conn *pgx.Conn, st slotState) error {
	if !st.exists {
		return nil
	}
	if err := s.foreign(ctx, conn, st); err != nil {
		return err
	}
	if !s.ownSlot {
		s.cfg.logger.Warn("replica: replacing a replication slot no running replica uses (left by one that stopped without dropping it; it kept WAL until now)",
			"slot", s.cfg.slot, "confirmed_flush_lsn", st.confirmed.String(), "invalidated", st.invalid)
	}
	// Only while nobody streams from it: one that got it meanwhile keeps
	// it, and creating ours then fails (and is retried).
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NULL", s.cfg.slot); err != nil {
		return fmt.Errorf("drop old slot %s: %w", s.cfg.slot, err)
	}
	s.ownSlot = false
	return nil
}

// checkHeld runs right after START_REPLICATION, when the slot is held by
// this source's connection and nobody can drop or make it: it fails with
// ErrSlotInUse if the slot is not the one this source made (another
// replica replaced it between checkResume and the start), before a
// change from it is applied.
func (s *PostgresSource) checkHeld(ctx context.Context, conn *pgx.Conn, pid uint32) error {
	st, err := s.inspectSlot(ctx, conn)
	if err != nil {
		return err
	}
	if !st.exists || st.activePID != pid || st.confirmed > s.confirmed {
		s.ownSlot = false
		return fmt.Errorf("slot %s was made anew by another replica while this one connected (held by pid %d, at %s; this one had confirmed %s): %w",
			s.cfg.slot, st.activePID, st.confirmed, s.confirmed, ErrSlotInUse)
	}
	return nil
}

// dropSlot drops this source's slot when Run ends, so that a stopped
// replica pins no WAL. Its replication connection has just closed; the
// server may call the slot active until that backend exits, so it is
// ended and the drop retried for a few seconds. The drop is only of the
// slot this source made: not one another replica made under the name,
// which would be past both where this source's slot was made and what it
// confirmed (a load that failed, or Run that ended, before the first
// confirmation leaves the slot at where it was made).
func (s *PostgresSource) dropSlot(ctx context.Context) {
	if !s.ownSlot || s.persist != nil { // durable mode keeps it to resume from
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := func() error {
		conn, err := s.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for {
			_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
				WHERE slot_name = $1 AND database = current_database() AND confirmed_flush_lsn <= $2::text::pg_lsn`,
				s.cfg.slot, max(s.confirmed, s.made).String())
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use: still active
				return err
			}
			conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = $2",
				s.cfg.slot, int32(s.walsender))
			select {
			case <-ctx.Done():
				return err
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	if err != nil {
		s.cfg.logger.Error("replica: could not drop the replication slot: it keeps WAL on the server until a replica with its name starts, or max_slot_wal_keep_size invalidates it; drop it by hand with pg_drop_replication_slot",
			"slot", s.cfg.slot, "err", err)
		return
	}
	s.ownSlot = false
	s.cfg.logger.Info("replica: replication slot dropped", "slot", s.cfg.slot)
}
