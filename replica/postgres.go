package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
// and swaps it in atomically. It drops its slot when Run returns (unless
// it is durable: PostgresPersist); a slot it finds in use by another
// replica is left alone (ErrSlotInUse). See "Replication slots and disk"
// and "Restart from disk" in the package doc.
//
// The server needs wal_level=logical; the user needs the REPLICATION
// attribute, SELECT on the tables, and to own the publication and the
// tables if the publication must be made or completed. Which tables it
// can follow, and what each replica identity means for it: see "Tables"
// in the package doc.
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
	// source made (it drops it when Run returns), made at position made.
	ownSlot bool
	made    pglogrepl.LSN
	// started is whether the tables were ever loaded: until then a table
	// the source cannot follow fails Run.
	started bool
	// walsender is the backend pid of the last replication connection.
	walsender uint32
	// tables are the bound tables as the catalog described them in the
	// last load's snapshot: what the stream's Relation messages and later
	// reads of the catalog are compared with.
	tables map[string]*pgTable
	// rels routes the stream's relations (by OID) to bound tables; nil
	// entries are relations of no bound table.
	rels         map[uint32]*pgRoute
	relations    map[uint32]*pglogrepl.RelationMessage
	decodeErrors atomic.Int64
	resyncs      *resyncCounter
	persist      *pgPersist // durable mode (PostgresPersist); nil without
	turns        snapshotTurns
	mu           sync.Mutex
	err          error
	// current is whether the tables are Ready (set with err); progress
	// wakes WaitFor when it or the position changes; stopped is closed
	// when the first Run returns, with runErr.
	current  atomic.Bool
	progress progress
	stopped  chan struct{}
	stopOnce sync.Once
	runErr   error
}

type pgConfig struct {
	slot, publication string
	slotNamed         bool
	persistPath       string
	persistEvery      time.Duration
	statusInterval    time.Duration
	catalogCheck      time.Duration
	minBackoff        time.Duration
	maxBackoff        time.Duration
	maxStaleness      time.Duration
	logger            *slog.Logger
	snapshotLimit     int
}

// PostgresOption configures a PostgresSource.
type PostgresOption func(*pgConfig)

// PostgresSlot names the replication slot (default "hlab_replica"). Each running
// replica needs its own: a source whose slot another one uses does not
// stream, and says so (ErrSlotInUse). The slot lives while Run runs, or
// longer with PostgresPersist.
func PostgresSlot(name string) PostgresOption {
	return func(c *pgConfig) { c.slot, c.slotNamed = name, true }
}

// PostgresPublication names the publication the source creates for its tables if
// it does not exist (default "hlab_replica").
func PostgresPublication(name string) PostgresOption {
	return func(c *pgConfig) { c.publication = name }
}

// PostgresStatusInterval is how often applied positions are confirmed
// (default 1s), each time asking the server to reply: its keepalive is
// what keeps an idle replica fresh (PostgresMaxStaleness).
func PostgresStatusInterval(d time.Duration) PostgresOption {
	return func(c *pgConfig) { c.statusInterval = d }
}

// PostgresCatalogCheck is how often the source reads the catalog for
// changes the stream does not carry (default 10s; 0: only at start and
// at every reconnect): a bound table dropped and made anew, dropped from
// the publication, altered, or a partition detached. Finding one, it
// resyncs (see "Tables" in the package doc). The reads take a few small
// queries over a connection of their own, held while the source streams.
func PostgresCatalogCheck(d time.Duration) PostgresOption {
	return func(c *pgConfig) { c.catalogCheck = d }
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
	c := pgConfig{slot: "hlab_replica", publication: "hlab_replica", statusInterval: time.Second, catalogCheck: 10 * time.Second,
		minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second, logger: slog.Default(), snapshotLimit: DefaultSnapshotLimit}
	for _, o := range opts {
		o(&c)
	}
	if len(bindings) == 0 {
		return nil, errors.New("replica: a source needs at least one bound table (replica.Bind)")
	}
	if !validIdent(c.slot) || !validIdent(c.publication) {
		return nil, fmt.Errorf("replica: slot %q and publication %q must be lower-case letters, digits and _", c.slot, c.publication)
	}
	if err := validateSnapshotLimit(c.snapshotLimit); err != nil {
		return nil, err
	}
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("replica: bad Postgres DSN: %w", err)
	}
	s := &PostgresSource{dsn: dsn, bindings: map[string]Binding{}, cfg: c, typeMap: pgtype.NewMap(), stopped: make(chan struct{}),
		resyncs: newResyncCounter(ResyncSlotDropped, ResyncSlotInvalidated, ResyncPublicationChanged, ResyncSchemaChanged,
			ResyncPartitionTruncated, ResyncUnchangedMissing)}
	for _, b := range bindings {
		name := qualified(b.tableName())
		if _, dup := s.bindings[name]; dup {
			return nil, fmt.Errorf("replica: table %s is bound twice", name)
		}
		s.bindings[name] = b
	}
	if err := boundStaleness(bindings, c.maxStaleness, c.statusInterval, "PostgresMaxStaleness", "PostgresStatusInterval"); err != nil {
		return nil, err
	}
	if err := s.initPersist(); err != nil {
		return nil, err
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
// ResyncSlotDropped, ResyncSlotInvalidated, ResyncPublicationChanged,
// ResyncSchemaChanged, ResyncPartitionTruncated and
// ResyncUnchangedMissing.
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
		s.progress.changed()
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
	s.current.Store(err == nil)
	s.progress.changed()
}

// Run loads the tables and keeps them fresh until ctx ends; then it drops
// its replication slot (waiting up to 5 s for the server), or with
// PostgresPersist writes its restart file and keeps the slot, and returns
// nil.
// A bound table it cannot follow ends it before the first load, with an
// error that wraps ErrUnsupportedTable and says what to change; a table
// that would pass its memory budget (MaxBytes) ends it at any time, with
// one that wraps ErrMemoryBudget. Other errors, and ErrUnsupportedTable
// after the first load, do not end it: it reports them through the
// tables' Err and readiness, reconnects with backoff, and resyncs when it
// must.
func (s *PostgresSource) Run(ctx context.Context) (err error) {
	defer s.stopOnce.Do(func() { s.runErr = err; close(s.stopped) })
	defer s.dropSlot(ctx)
	// Stops the restart file's writer and writes the last file, before
	// the slot is dropped (not in durable mode).
	defer s.startPersisting()()
	for attempt := 0; ; attempt++ {
		streamed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !s.started && errors.Is(err, ErrUnsupportedTable) {
			s.setErr(err)
			s.cfg.logger.Error("replica: cannot follow the tables bound", "err", err)
			return err
		}
		if errors.Is(err, ErrMemoryBudget) {
			s.setErr(err)
			s.cfg.logger.Error("replica: stopped: a table would pass its memory budget", "err", err)
			return err
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
	maps.Copy(cfg.RuntimeParams, textSession)
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
	sctx, stop := context.WithCancelCause(ctx)
	var watch sync.WaitGroup
	if s.cfg.catalogCheck > 0 {
		watch.Go(func() { s.watchCatalog(sctx, stop) })
	}
	err = s.stream(sctx, repl, caughtUp)
	if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil {
		err = cause
	}
	stop(nil)
	watch.Wait()
	return true, err
}

// watchCatalog reads the catalog every catalogCheck for what the stream
// does not carry: the publication losing a bound table or an operation,
// a bound table dropped (and made anew), its columns or replica identity
// changed, a partition attached or detached. Finding one, it ends the
// stream (stop); the next session's start completes the publication and
// resyncs. Failing to read the catalog is left to the stream to notice.
func (s *PostgresSource) watchCatalog(ctx context.Context, stop context.CancelCauseFunc) {
	tick := time.NewTicker(s.cfg.catalogCheck)
	defer tick.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil || conn.IsClosed() {
			var err error
			if conn, err = s.connect(ctx); err != nil {
				conn = nil
				continue
			}
		}
		if why := s.catalogChanged(ctx, conn); why != "" {
			s.cfg.logger.Warn("replica: the catalog changed under the stream", "why", why)
			stop(errors.New("the catalog changed: " + why))
			return
		}
	}
}

// catalogChanged says how the bound tables or the publication now differ
// from what the tables were loaded with ("" if they do not).
func (s *PostgresSource) catalogChanged(ctx context.Context, conn *pgx.Conn) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tables, err := s.readTables(ctx, conn)
	if errors.Is(err, ErrUnsupportedTable) || errors.Is(err, errTableMissing) {
		return err.Error()
	}
	if err != nil {
		return ""
	}
	if diff := diffTables(s.tables, tables); diff != "" {
		return diff
	}
	if fix, err := s.planPublication(ctx, conn, tables); err == nil && len(fix.lacks) > 0 {
		return strings.Join(fix.lacks, "; ")
	}
	return ""
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
	// Before the publication: a table without a replica identity in a
	// publication that publishes updates makes its UPDATEs fail.
	tables, err := s.readTables(ctx, conn)
	if err != nil {
		return 0, err
	}
	lacked, err := s.ensurePublication(ctx, conn, tables)
	if err != nil {
		return 0, err
	}
	if s.loaded && lacked != "" {
		// What the publication lacked while this replica followed it, the
		// stream did not carry.
		s.resync(ResyncPublicationChanged, lacked)
	}
	if diff := diffTables(s.tables, tables); s.loaded && diff != "" {
		s.resync(ResyncSchemaChanged, diff)
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
	if s.persist != nil && !s.started {
		s.restoreFromDisk(ctx, conn, tables, slot, sys)
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
		if start, err = s.loadSnapshot(ctx, repl, conn); err != nil {
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

func (s *PostgresSource) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return nil, err
	}
	// The snapshot's values are decoded from text, as the stream's are.
	maps.Copy(cfg.RuntimeParams, textSession)
	conn, err := pgx.ConnectConfig(ctx, cfg)
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
	s.made = lsn
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
	// The tables as they are at the slot's consistent point, where the
	// stream starts.
	tables, err := s.readTables(ctx, tx)
	if err != nil {
		return 0, err
	}
	s.loadTypes(ctx, tx.Conn(), tables)
	for _, name := range slices.Sorted(maps.Keys(s.bindings)) {
		if err := s.copyTable(ctx, tx, tables[name], s.bindings[name]); err != nil {
			return 0, err
		}
	}
	for _, b := range s.bindings {
		b.finishLoad(now)
	}
	s.tables = tables
	s.applied, s.confirmed, s.loaded, s.started = lsn, lsn, true, true
	s.position.Store(uint64(lsn))
	s.cfg.logger.Info("replica: tables loaded from a snapshot", "slot", s.cfg.slot, "lsn", lsn.String(), "took", time.Since(now))
	return lsn, nil
}

// copyTable copies a table's rows inside the snapshot: the columns the
// stream carries, as text, decoded as the stream's are, so a row reads
// the same from either. A partitioned table is read whole; a table with
// inheritance children, ONLY (their rows are theirs: the stream carries
// them under their own names).
func (s *PostgresSource) copyTable(ctx context.Context, tx pgx.Tx, t *pgTable, b Binding) error {
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = pgx.Identifier{c.name}.Sanitize()
	}
	from := "ONLY " + quoteTable(t.name)
	if t.partitioned {
		from = quoteTable(t.name)
	}
	if err := checkNotRewritten(ctx, tx, t); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+from, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return fmt.Errorf("copy %s: %w", t.name, err)
	}
	defer rows.Close()
	b.beginLoad(t.shape)
	for rows.Next() {
		r, err := s.textRow(t.columns, rows.RawValues())
		if err == nil {
			err = b.loadRow(r)
		}
		if errors.Is(err, errKeyNotFromIdentity) {
			return fmt.Errorf("%w: table %s: %w", ErrUnsupportedTable, t.name, err)
		}
		if errors.Is(err, ErrMemoryBudget) {
			return err
		}
		if err != nil {
			s.decodeFailed(t.name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("copy %s: %w", t.name, err)
	}
	return nil
}

// checkNotRewritten locks t against a TRUNCATE (or another rewrite of its
// files) while it is copied, and fails if one happened since the
// snapshot was taken: such a rewrite is not MVCC-safe, and the snapshot
// would see the table empty, or without rows the stream will update.
// The session then loads again, from a new snapshot.
func checkNotRewritten(ctx context.Context, tx pgx.Tx, t *pgTable) error {
	if _, err := tx.Exec(ctx, "LOCK TABLE "+quoteTable(t.name)+" IN ACCESS SHARE MODE"); err != nil {
		return fmt.Errorf("lock %s for its copy: %w", t.name, err)
	}
	// pg_class as of the snapshot against the files as they are now.
	var rewritten []string
	rows, err := tx.Query(ctx, `SELECT relname FROM pg_class WHERE oid = ANY ($1) AND relfilenode <> pg_relation_filenode(oid)`,
		slices.Collect(maps.Keys(t.rels)))
	if err == nil {
		rewritten, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", t.name, err)
	}
	if len(rewritten) > 0 {
		return fmt.Errorf("copy %s: %v truncated or rewritten since the snapshot was taken: loading again", t.name, rewritten)
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
	s.rels = map[uint32]*pgRoute{}
	for name, t := range s.tables {
		for oid, rel := range t.rels {
			s.rels[oid] = &pgRoute{t: t, rel: rel, b: s.bindings[name]}
		}
	}
	var (
		inTx     bool
		skipTx   bool
		touched  = map[Binding]bool{}
		received = s.applied
		ready    = s.applied >= caughtUp
		// replyPending: a keepalive was asked for and has not come.
		replyPending bool
	)
	// Ask for an immediate keepalive: it tells how far the server is, so
	// readiness does not wait for the next idle keepalive (30 s).
	if err := s.sendStatus(ctx, repl, true); err != nil {
		return err
	}
	nextStatus := time.Now().Add(s.cfg.statusInterval)
	heard := time.Now()
	for {
		if time.Now().After(nextStatus) {
			// The server's reply says whether anything is pending: while
			// nothing changes, it is what keeps the tables fresh.
			if err := s.sendStatus(ctx, repl, true); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.statusInterval)
		}
		if s.progress.asked() && !replyPending {
			// A WaitFor is behind: the keepalive says how far the server
			// is. One request at a time: its reply serves every waiter.
			if err := s.sendStatus(ctx, repl, true); err != nil {
				return err
			}
			replyPending = true
		}
		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		s.progress.receiving(cancel)
		raw, err := repl.ReceiveMessage(rctx)
		s.progress.receiving(nil)
		cancel()
		if err != nil {
			// A deadline, or a WaitFor's interrupt: the connection is fine,
			// unless the server has been silent too long.
			if (pgconn.Timeout(err) || errors.Is(err, context.Canceled)) && ctx.Err() == nil {
				if err := s.cfg.checkHeard(heard); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("replication stream: %w", err)
		}
		heard = time.Now()
		if e, ok := raw.(*pgproto3.ErrorResponse); ok {
			return fmt.Errorf("replication stream: %s (%s)", e.Message, e.Code)
		}
		cd, ok := raw.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			continue
		}
		// whole: a transaction applied, or a keepalive between
		// transactions: the tables hold everything the server had sent.
		whole := false
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive: %w", err)
			}
			received, replyPending = max(received, k.ServerWALEnd), false
			if !inTx {
				// The server sent everything before ServerWALEnd and we are
				// between transactions: it may recycle up to there.
				s.confirm(k.ServerWALEnd)
				whole = true
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
				if err := s.relation(ctx, m); err != nil {
					return err
				}
			case *pglogrepl.BeginMessage:
				inTx = true
				// A transaction this replica applied before a reconnect.
				skipTx = m.FinalLSN < s.applied
			case *pglogrepl.CommitMessage:
				if !skipTx {
					if err := overBudget(touched); err != nil {
						return err
					}
					for b := range touched {
						b.flush(m.CommitTime)
					}
					s.applied = m.TransactionEndLSN
					s.confirm(s.applied)
				}
				clear(touched)
				inTx, skipTx = false, false
				whole = true
			default:
				if !skipTx {
					if err := s.change(msg, touched); err != nil {
						return err
					}
				}
			}
		}
		if !ready && received >= caughtUp && !inTx {
			ready = true
			s.setErr(nil)
		}
		// Fresh only once caught up with where the server was when this
		// connection began: before, the tables lag what it has.
		if ready && whole {
			confirmFresh(maps.Values(s.bindings), time.Now())
		}
		s.persistTick(inTx)
	}
}

// pgRoute is where the stream's changes of one relation go.
type pgRoute struct {
	t   *pgTable
	rel *pgRel
	b   Binding
}

// resyncNow ends the stream to reload every table (see resync).
func (s *PostgresSource) resyncNow(reason, why string) error {
	s.resync(reason, why)
	return errors.New("resyncing: " + why)
}

// relation takes note of a relation whose changes follow. A bound
// relation whose columns, their types or replica identity are not those
// loaded, a bound table made anew, or a new partition of a bound table,
// means the replica's rows may no longer be the table's without a change
// in the stream to say so (a column added with a default; a table
// attached with its rows): the source resyncs.
func (s *PostgresSource) relation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	s.relations[m.RelationID] = m
	name := m.Namespace + "." + m.RelationName
	if r, known := s.rels[m.RelationID]; known {
		if r != nil && messageSig(m) != r.rel.sig {
			return s.resyncNow(ResyncSchemaChanged, "table "+name+" changed (its columns, their types or its replica identity)")
		}
		return nil
	}
	if _, bound := s.bindings[name]; bound {
		return s.resyncNow(ResyncSchemaChanged, "table "+name+" was dropped and made anew")
	}
	root, err := s.boundAncestor(ctx, m.RelationID)
	if err != nil {
		return err
	}
	if root != "" {
		return s.resyncNow(ResyncSchemaChanged, "partition "+name+" was attached to "+root)
	}
	s.rels[m.RelationID] = nil // another publisher's table
	return nil
}

// boundAncestor returns the bound table that relation oid is a partition
// of ("" if none).
func (s *PostgresSource) boundAncestor(ctx context.Context, oid uint32) (string, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := conn.Query(qctx, `SELECT n.nspname || '.' || c.relname FROM pg_partition_ancestors($1::oid::regclass) a
		JOIN pg_class c ON c.oid = a.relid::oid JOIN pg_namespace n ON n.oid = c.relnamespace`, oid)
	if err != nil {
		return "", fmt.Errorf("read the ancestors of relation %d: %w", oid, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "", nil // dropped since: its changes went nowhere
	}
	if err != nil {
		return "", fmt.Errorf("read the ancestors of relation %d: %w", oid, err)
	}
	for _, n := range names {
		if _, bound := s.bindings[n]; bound {
			return n, nil
		}
	}
	return "", nil
}

// change applies an insert, update, delete or truncate to its table's
// pending transaction. A row that does not decode is counted and
// skipped; an error means the stream must end (to resync).
func (s *PostgresSource) change(msg pglogrepl.Message, touched map[Binding]bool) error {
	var (
		relID uint32
		apply func(*pglogrepl.RelationMessage, Binding) error
	)
	switch m := msg.(type) {
	case *pglogrepl.InsertMessage:
		relID = m.RelationID
		apply = func(rel *pglogrepl.RelationMessage, b Binding) error {
			row, _, err := s.tupleRow(rel, m.Tuple, false)
			if err != nil {
				return err
			}
			return b.upsert(row)
		}
	case *pglogrepl.UpdateMessage:
		relID = m.RelationID
		apply = func(rel *pglogrepl.RelationMessage, b Binding) error { return s.update(rel, b, m) }
	case *pglogrepl.DeleteMessage:
		relID = m.RelationID
		apply = func(rel *pglogrepl.RelationMessage, b Binding) error {
			row, _, err := s.tupleRow(rel, m.OldTuple, m.OldTupleType == 'K')
			if err != nil {
				return err
			}
			return b.remove(row)
		}
	case *pglogrepl.TruncateMessage:
		return s.truncate(m, touched)
	default:
		return nil
	}
	r, rel := s.rels[relID], s.relations[relID]
	if r == nil || rel == nil {
		return nil
	}
	// Touched even if the row fails: what the binding keeps of the
	// source's rows commits with the transaction.
	touched[r.b] = true
	err := apply(rel, r.b)
	if errors.Is(err, errUnchangedMissing) {
		return s.resyncNow(ResyncUnchangedMissing, fmt.Sprintf("table %s: %v", r.t.name, err))
	}
	if err != nil {
		s.decodeFailed(r.t.name, err)
	}
	return nil
}

// update applies an update. Values it left unchanged and did not send
// come from the old row when the replica identity is FULL, else from the
// replica's copy of the row.
func (s *PostgresSource) update(rel *pglogrepl.RelationMessage, b Binding, m *pglogrepl.UpdateMessage) error {
	row, unchanged, err := s.tupleRow(rel, m.NewTuple, false)
	if err != nil {
		return err
	}
	var old Row
	if m.OldTuple != nil {
		if old, _, err = s.tupleRow(rel, m.OldTuple, m.OldTupleType == 'K'); err != nil {
			return fmt.Errorf("old row: %w", err)
		}
		if m.OldTupleType == 'O' {
			rest := unchanged[:0]
			for _, c := range unchanged {
				if v, ok := old[c]; ok {
					row[c] = v
				} else {
					rest = append(rest, c)
				}
			}
			unchanged = rest
		}
	}
	return b.update(old, row, unchanged)
}

// truncate applies a TRUNCATE. Of a partitioned table it lists the leaf
// partitions: all of them empty the table; only some, and the replica
// cannot tell which of its rows were theirs, so it resyncs.
func (s *PostgresSource) truncate(m *pglogrepl.TruncateMessage, touched map[Binding]bool) error {
	leaves := map[*pgTable]int{}
	for _, id := range m.RelationIDs {
		if r := s.rels[id]; r != nil {
			leaves[r.t]++
		}
	}
	for t, n := range leaves {
		if n < len(t.rels) {
			return s.resyncNow(ResyncPartitionTruncated, fmt.Sprintf("a TRUNCATE of %d of the %d partitions of %s", n, len(t.rels), t.name))
		}
		b := s.bindings[t.name]
		b.truncate()
		touched[b] = true
	}
	return nil
}

func (s *PostgresSource) sendStatus(ctx context.Context, repl *pgconn.PgConn, reply bool) error {
	err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
		// The flush position is what the slot's confirmed_flush_lsn becomes.
		WALWritePosition: s.confirmed, WALFlushPosition: s.flushPosition(), WALApplyPosition: s.flushPosition(),
		ClientTime: time.Now(), ReplyRequested: reply,
	})
	if err != nil {
		return fmt.Errorf("standby status update: %w", err)
	}
	return nil
}
