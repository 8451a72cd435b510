package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// PostgresSource fills tables from PostgreSQL and keeps them fresh by
// logical replication (pgoutput). It creates a replication slot that
// exports a snapshot, copies every bound table inside that snapshot, and
// streams changes from the slot's consistent point: no change between the
// copy and the stream is lost or applied twice. Each transaction becomes
// visible at once, when its commit arrives. It confirms applied positions
// so the server can recycle WAL, reconnects and resumes from its slot
// after a broken connection or a server restart, and, if its slot is gone
// or the server invalidated it, resyncs every table from a new snapshot
// and swaps it in atomically. It drops its slot when Run returns; a slot
// it finds in use by another replica is left alone (ErrSlotInUse). See
// "Replication slots and disk" in the package doc.
//
// The server needs wal_level=logical; the user needs the REPLICATION
// attribute and SELECT on the tables. Tables need a primary key (REPLICA
// IDENTITY DEFAULT) for deletes to carry their key.
type PostgresSource struct {
	dsn      string
	bindings map[string]Binding // by "schema.table"
	cfg      pgConfig

	typeMap *pgtype.Map

	// applied is the end LSN of the last transaction made visible: on a
	// resume, transactions that committed before it are skipped.
	applied pglogrepl.LSN
	// confirmed is what the server is told it may recycle: applied, or
	// further when idle keepalives show nothing of ours is pending. Every
	// change to the tables that committed before it is visible in them.
	confirmed pglogrepl.LSN
	position  atomic.Uint64 // confirmed, for other goroutines (AppliedLSN)
	loaded    bool
	// ownSlot is whether the slot that bears the name is the one this
	// source made (it drops it when Run returns).
	ownSlot bool
	// walsender is the backend pid of the last replication connection.
	walsender    uint32
	relations    map[uint32]*pglogrepl.RelationMessage
	decodeErrors atomic.Int64
	resyncs      *resyncCounter
	mu           sync.Mutex
	err          error
}

type pgConfig struct {
	slot, publication string
	statusInterval    time.Duration
	minBackoff        time.Duration
	maxBackoff        time.Duration
	logger            *slog.Logger
}

// PostgresOption configures a PostgresSource.
type PostgresOption func(*pgConfig)

// PostgresSlot names the replication slot (default "hlab_replica"). Each running
// replica needs its own: a source whose slot another one uses does not
// stream, and says so (ErrSlotInUse). The slot lives while Run runs.
func PostgresSlot(name string) PostgresOption { return func(c *pgConfig) { c.slot = name } }

// PostgresPublication names the publication the source creates for its tables if
// it does not exist (default "hlab_replica").
func PostgresPublication(name string) PostgresOption {
	return func(c *pgConfig) { c.publication = name }
}

// PostgresStatusInterval is how often applied positions are confirmed (default 1s).
func PostgresStatusInterval(d time.Duration) PostgresOption {
	return func(c *pgConfig) { c.statusInterval = d }
}

// PostgresBackoff bounds the wait between reconnects (default 100ms to 5s).
func PostgresBackoff(min, max time.Duration) PostgresOption {
	return func(c *pgConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// PostgresLogger sets where the source logs (default slog.Default()).
func PostgresLogger(l *slog.Logger) PostgresOption { return func(c *pgConfig) { c.logger = l } }

// NewPostgresSource returns a source for the tables bound; dsn is a
// libpq-style connection string or URL.
func NewPostgresSource(dsn string, bindings []Binding, opts ...PostgresOption) (*PostgresSource, error) {
	c := pgConfig{slot: "hlab_replica", publication: "hlab_replica", statusInterval: time.Second,
		minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second, logger: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if len(bindings) == 0 {
		return nil, errors.New("replica: a source needs at least one bound table (replica.Bind)")
	}
	if !validIdent(c.slot) || !validIdent(c.publication) {
		return nil, fmt.Errorf("replica: slot %q and publication %q must be lower-case letters, digits and _", c.slot, c.publication)
	}
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("replica: bad Postgres DSN: %w", err)
	}
	s := &PostgresSource{dsn: dsn, bindings: map[string]Binding{}, cfg: c, typeMap: pgtype.NewMap(),
		resyncs: newResyncCounter(ResyncSlotDropped, ResyncSlotInvalidated)}
	for _, b := range bindings {
		name := qualified(b.tableName())
		if _, dup := s.bindings[name]; dup {
			return nil, fmt.Errorf("replica: table %s is bound twice", name)
		}
		s.bindings[name] = b
	}
	return s, nil
}

func qualified(name string) string {
	if strings.Contains(name, ".") {
		return name
	}
	return "public." + name
}

func validIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// DecodeErrors counts rows that failed to decode (each is logged with its key).
func (s *PostgresSource) DecodeErrors() int64 { return s.decodeErrors.Load() }

// Resyncs counts full resyncs after the first load (a dropped or
// invalidated slot).
func (s *PostgresSource) Resyncs() int64 { return s.resyncs.total() }

// ResyncsByReason counts full resyncs by why they were needed:
// ResyncSlotDropped and ResyncSlotInvalidated.
func (s *PostgresSource) ResyncsByReason() map[string]int64 { return s.resyncs.byReason() }

// AppliedLSN is how far the tables are: every change to them that
// committed before this WAL position is visible in them. It is 0 until
// the first load, and moves with each applied transaction and, while
// changes elsewhere go by, with the server's keepalives. A replica has
// caught up with a point of the server's history
// (pg_current_wal_insert_lsn() read after a fault's last write; see the
// package doc) once AppliedLSN reaches it and its
// tables are Ready.
func (s *PostgresSource) AppliedLSN() pglogrepl.LSN { return pglogrepl.LSN(s.position.Load()) }

// confirm records that everything before lsn is applied.
func (s *PostgresSource) confirm(lsn pglogrepl.LSN) {
	if lsn > s.confirmed {
		s.confirmed = lsn
		s.position.Store(uint64(lsn))
	}
}

// Err is why the source is not streaming now, nil while it is.
func (s *PostgresSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *PostgresSource) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	for _, b := range s.bindings {
		b.setReady(err)
	}
}

// Run loads the tables and keeps them fresh until ctx ends; then it drops
// its replication slot (waiting up to 5 s for the server) and returns nil.
// Errors do not end it: it reports them through the tables' Err and
// readiness, reconnects with backoff, and resyncs when it must.
func (s *PostgresSource) Run(ctx context.Context) error {
	defer s.dropSlot(ctx)
	for attempt := 0; ; attempt++ {
		streamed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if streamed {
			attempt = 0
		}
		wait := min(s.cfg.minBackoff<<min(attempt, 10), s.cfg.maxBackoff)
		s.setErr(fmt.Errorf("replica: %w; reconnecting in %s", err, wait))
		s.cfg.logger.Warn("replica: replication interrupted", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// session connects, loads or resumes, and streams until an error. It
// reports whether it got to streaming (to reset the backoff).
func (s *PostgresSource) session(ctx context.Context) (bool, error) {
	cfg, err := pgconn.ParseConfig(s.dsn)
	if err != nil {
		return false, err
	}
	cfg.RuntimeParams["replication"] = "database"
	ctxConn, cancel := context.WithTimeout(ctx, 10*time.Second)
	repl, err := pgconn.ConnectConfig(ctxConn, cfg)
	cancel()
	if err != nil {
		return false, fmt.Errorf("replication connection: %w", err)
	}
	defer repl.Close(context.WithoutCancel(ctx))
	caughtUp, err := s.start(ctx, repl)
	if err != nil {
		return false, err
	}
	return true, s.stream(ctx, repl, caughtUp)
}

// start loads the tables (the first time, or to resync) or checks that
// the slot is still this source's to resume from, and starts replication
// on repl. It returns the server's WAL position when it connected: the
// tables are current once the stream has got there.
func (s *PostgresSource) start(ctx context.Context, repl *pgconn.PgConn) (pglogrepl.LSN, error) {
	// One plain connection for the publication, the slot's state and the
	// snapshot's copy.
	conn, err := s.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := s.ensurePublication(ctx, conn); err != nil {
		return 0, err
	}
	sys, err := pglogrepl.IdentifySystem(ctx, repl)
	if err != nil {
		return 0, fmt.Errorf("identify system: %w", err)
	}
	// Whatever arrived of a transaction before the last connection broke
	// is gone with it: the stream resends it whole, or a snapshot has it.
	for _, b := range s.bindings {
		b.reset()
	}
	slot, err := s.inspectSlot(ctx, conn)
	if err != nil {
		return 0, err
	}
	if s.loaded {
		if err := s.checkResume(ctx, conn, slot); err != nil {
			return 0, err
		}
	}
	start := s.applied
	if !s.loaded {
		if err := s.clearSlot(ctx, conn, slot); err != nil {
			return 0, err
		}
		if start, err = s.snapshot(ctx, repl, conn); err != nil {
			return 0, err
		}
	}
	err = pglogrepl.StartReplication(ctx, repl, s.cfg.slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + s.cfg.publication + "'"},
	})
	if err != nil {
		return 0, fmt.Errorf("start replication on slot %s: %w", s.cfg.slot, err)
	}
	s.walsender = repl.PID()
	// The server starts a slot at its own confirmed position whatever it
	// is asked: streaming from another replica's slot would skip what this
	// one has not applied.
	if err := s.checkHeld(ctx, conn, repl.PID()); err != nil {
		return 0, err
	}
	// Ready once everything committed before this connection is applied.
	if start >= sys.XLogPos {
		s.setErr(nil)
	}
	return sys.XLogPos, nil
}

func (s *PostgresSource) ensurePublication(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", s.cfg.publication).Scan(&exists); err != nil {
		return fmt.Errorf("check publication: %w", err)
	}
	if exists {
		return nil
	}
	var tables []string
	for name := range s.bindings {
		schema, table, _ := strings.Cut(name, ".")
		tables = append(tables, pgx.Identifier{schema, table}.Sanitize())
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{s.cfg.publication}.Sanitize()+" FOR TABLE "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("create publication %s (does every bound table exist?): %w", s.cfg.publication, err)
	}
	return nil
}

func (s *PostgresSource) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// snapshot creates the slot with an exported snapshot, copies every
// table inside it, and swaps the copies in. It returns the slot's
// consistent point, where streaming starts.
func (s *PostgresSource) snapshot(ctx context.Context, repl *pgconn.PgConn, conn *pgx.Conn) (pglogrepl.LSN, error) {
	slot, err := pglogrepl.CreateReplicationSlot(ctx, repl, s.cfg.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return 0, fmt.Errorf("create replication slot %s: %w", s.cfg.slot, err)
	}
	s.ownSlot = true
	lsn, err := pglogrepl.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("slot consistent point %q: %w", slot.ConsistentPoint, err)
	}
	// The exported snapshot lives until the replication connection runs
	// its next command, so the copy happens now, before StartReplication.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("snapshot transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+slot.SnapshotName+"'"); err != nil {
		return 0, fmt.Errorf("use the slot's snapshot: %w", err)
	}
	now := time.Now()
	for name, b := range s.bindings {
		if err := s.copyTable(ctx, tx, name, b); err != nil {
			return 0, err
		}
	}
	for _, b := range s.bindings {
		b.finishLoad(now)
	}
	s.applied, s.confirmed, s.loaded = lsn, lsn, true
	s.position.Store(uint64(lsn))
	s.cfg.logger.Info("replica: tables loaded from a snapshot", "slot", s.cfg.slot, "lsn", lsn.String(), "took", time.Since(now))
	return lsn, nil
}

func (s *PostgresSource) copyTable(ctx context.Context, tx pgx.Tx, name string, b Binding) error {
	schema, table, _ := strings.Cut(name, ".")
	rows, err := tx.Query(ctx, "SELECT * FROM "+pgx.Identifier{schema, table}.Sanitize())
	if err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	defer rows.Close()
	b.beginLoad()
	fields := rows.FieldDescriptions()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		r := make(Row, len(fields))
		for i, f := range fields {
			r[f.Name] = vals[i]
		}
		if err := b.loadRow(r); err != nil {
			s.decodeFailed(name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	return nil
}

func (s *PostgresSource) decodeFailed(table string, err error) {
	s.decodeErrors.Add(1)
	s.cfg.logger.Error("replica: row not applied: it does not decode", "table", table, "err", err)
}

// stream applies transactions until the connection fails or ctx ends.
func (s *PostgresSource) stream(ctx context.Context, repl *pgconn.PgConn, caughtUp pglogrepl.LSN) error {
	s.relations = map[uint32]*pglogrepl.RelationMessage{}
	var (
		inTx     bool
		skipTx   bool
		touched  = map[Binding]bool{}
		received = s.applied
		ready    = s.applied >= caughtUp
	)
	// Ask for an immediate keepalive: it tells how far the server is, so
	// readiness does not wait for the next idle keepalive (30 s).
	if err := s.sendStatus(ctx, repl, true); err != nil {
		return err
	}
	nextStatus := time.Now().Add(s.cfg.statusInterval)
	for {
		if time.Now().After(nextStatus) {
			if err := s.sendStatus(ctx, repl, false); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.statusInterval)
		}
		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		raw, err := repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("replication stream: %w", err)
		}
		if e, ok := raw.(*pgproto3.ErrorResponse); ok {
			return fmt.Errorf("replication stream: %s (%s)", e.Message, e.Code)
		}
		cd, ok := raw.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive: %w", err)
			}
			received = max(received, k.ServerWALEnd)
			if !inTx {
				// The server sent everything before ServerWALEnd and we are
				// between transactions: it may recycle up to there.
				s.confirm(k.ServerWALEnd)
			}
			if k.ReplyRequested {
				nextStatus = time.Time{}
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return fmt.Errorf("xlog data: %w", err)
			}
			received = max(received, x.WALStart)
			msg, err := pglogrepl.Parse(x.WALData)
			if err != nil {
				return fmt.Errorf("parse pgoutput message: %w", err)
			}
			switch m := msg.(type) {
			case *pglogrepl.RelationMessage:
				s.relations[m.RelationID] = m
			case *pglogrepl.BeginMessage:
				inTx = true
				// A transaction this replica applied before a reconnect.
				skipTx = m.FinalLSN < s.applied
			case *pglogrepl.CommitMessage:
				if !skipTx {
					for b := range touched {
						b.flush(m.CommitTime)
					}
					s.applied = m.TransactionEndLSN
					s.confirm(s.applied)
				}
				clear(touched)
				inTx, skipTx = false, false
			case *pglogrepl.InsertMessage:
				if !skipTx {
					s.change(m.RelationID, m.Tuple, nil, touched, false)
				}
			case *pglogrepl.UpdateMessage:
				if !skipTx {
					if m.OldTuple != nil { // the key changed: drop the old row
						s.change(m.RelationID, m.OldTuple, nil, touched, true)
					}
					s.change(m.RelationID, m.NewTuple, m.OldTuple, touched, false)
				}
			case *pglogrepl.DeleteMessage:
				if !skipTx {
					s.change(m.RelationID, m.OldTuple, nil, touched, true)
				}
			case *pglogrepl.TruncateMessage:
				if !skipTx {
					for _, id := range m.RelationIDs {
						if b := s.bindingFor(id); b != nil {
							b.truncate()
							touched[b] = true
						}
					}
				}
			}
		}
		if !ready && received >= caughtUp && !inTx {
			ready = true
			s.setErr(nil)
		}
	}
}

func (s *PostgresSource) bindingFor(relID uint32) Binding {
	rel := s.relations[relID]
	if rel == nil {
		return nil
	}
	return s.bindings[rel.Namespace+"."+rel.RelationName]
}

// change decodes one tuple into its table's pending transaction. old, when
// given, supplies unchanged TOAST values the new tuple leaves out.
func (s *PostgresSource) change(relID uint32, tuple, old *pglogrepl.TupleData, touched map[Binding]bool, del bool) {
	rel := s.relations[relID]
	b := s.bindingFor(relID)
	if rel == nil || b == nil || tuple == nil {
		return
	}
	row := make(Row, len(tuple.Columns))
	for i, col := range tuple.Columns {
		if i >= len(rel.Columns) {
			break
		}
		name := rel.Columns[i].Name
		switch col.DataType {
		case 'n':
			row[name] = nil
		case 'u': // unchanged TOAST value: only the old tuple may have it
			if old != nil && i < len(old.Columns) && old.Columns[i].DataType == 't' {
				row[name], _ = s.decodeText(old.Columns[i].Data, rel.Columns[i].DataType)
			}
		case 't':
			v, err := s.decodeText(col.Data, rel.Columns[i].DataType)
			if err != nil {
				s.decodeFailed(rel.Namespace+"."+rel.RelationName, fmt.Errorf("column %s: %w", name, err))
				return
			}
			row[name] = v
		}
	}
	var err error
	if del {
		err = b.remove(row)
	} else {
		err = b.upsert(row)
	}
	if err != nil {
		s.decodeFailed(rel.Namespace+"."+rel.RelationName, err)
		return
	}
	touched[b] = true
}

func (s *PostgresSource) decodeText(data []byte, oid uint32) (any, error) {
	if t, ok := s.typeMap.TypeForOID(oid); ok {
		return t.Codec.DecodeValue(s.typeMap, oid, pgtype.TextFormatCode, data)
	}
	return string(data), nil
}

func (s *PostgresSource) sendStatus(ctx context.Context, repl *pgconn.PgConn, reply bool) error {
	err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: s.confirmed, WALFlushPosition: s.confirmed, WALApplyPosition: s.confirmed,
		ClientTime: time.Now(), ReplyRequested: reply,
	})
	if err != nil {
		return fmt.Errorf("standby status update: %w", err)
	}
	return nil
}
