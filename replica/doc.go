// Package replica keeps in-memory copies of database tables fresh by
// change data capture, for services that read small reference data on
// every request (report B: 8x fewer queries, 15 ms -> 1 ms).
//
// A Table[K, V] is filled from a consistent snapshot and then kept fresh
// from the database's change stream by a source:
//
//	products := replica.NewTable[int64, Product]("public.products")
//	byName := replica.NewIndex(products, func(a, b Product) bool {
//		return a.Name < b.Name || a.Name == b.Name && a.ID < b.ID
//	})
//	src, err := replica.NewPostgresSource(dsn, []replica.Binding{
//		replica.Bind(products, productID, decodeProduct),
//	}, replica.PostgresSlot("pricing_1"))
//	if err != nil { ... }
//	go src.Run(ctx) // returns at once, with what to change, if it cannot follow a table
//	if err := products.WaitReady(ctx); err != nil { ... } // the snapshot is loaded
//
//	p, ok := products.Get(42)                  // lock-free, no allocation
//	byName.AscendFrom(Product{Name: "m"}, ...) // sorted and range reads
//
// Key and decode functions check what they read: a row that fails them
// is counted and skipped, and so is one that makes them panic.
//
//	func productID(r replica.Row) (int64, error) {
//		id, ok := r["id"].(int64)
//		if !ok {
//			return 0, fmt.Errorf("id is %T, want int64", r["id"])
//		}
//		return id, nil
//	}
//
// # Guarantees
//
//   - Reads never wait for the applier and never see a half-applied
//     transaction or a half-loaded table: each source transaction, and
//     each full load, becomes visible at once. Tables are updated one
//     after another, so two tables may briefly be at different points.
//   - PostgresSource takes its snapshot inside the replication slot's
//     exported snapshot and streams from the slot's consistent point: no
//     change between the two is lost or applied twice. After a reconnect
//     it resumes from its slot and skips what it already applied; a
//     transaction the reconnect cut off is forgotten and received again
//     whole. If the slot is gone, or the server invalidated it, it makes
//     a new one, reloads every table from its snapshot and swaps the
//     copies in (counted and logged with the reason: ResyncsByReason,
//     replica_resyncs_total). It never resumes from a slot another
//     replica made (see below).
//   - Ready is false until the snapshot is loaded, and again while the
//     source reconnects, resyncs or catches up; the table keeps serving its
//     last data meanwhile. Err says why, so request handlers (and
//     /healthz) can report it instead of errors staying in the source's
//     goroutine.
//   - A row that fails to decode, or makes the key or decode function
//     panic, is logged with its key, counted (DecodeErrors,
//     replica_decode_errors_total) and skipped: the replica keeps the
//     row as it was (an update that changes the key deletes the old key
//     only once the new row decodes). It never stops the applier.
//   - A change the stream cannot carry (see "Tables" below) makes the
//     source resync, counted by reason, or, before the first load, fails
//     Run with what to change (ErrUnsupportedTable). The replica is
//     exact, or it says it is not: it never serves frozen data as Ready.
//
// # Bounded staleness
//
// A table's freshness is the last time its source knew the table held
// everything the database had committed: when it applied a transaction,
// or, while nothing changes, when the server answered that nothing was
// pending (PostgresSource: a keepalive between transactions, which it
// asks for every PostgresStatusInterval; MongoSource: an empty batch,
// every MongoMaxAwait). A source that is reconnecting, resyncing or
// catching up confirms nothing. Table.Age is the time since then
// (replica_staleness_seconds{table}), read without a lock.
//
// With PostgresMaxStaleness(d) or MongoMaxStaleness(d), Table.Fresh
// returns a *StaleError, matching ErrStale and carrying the age, once
// Age passes d: a handler asks it once per request and answers 503
// instead of data the replica cannot vouch for. Get itself never fails
// and stays lock-free; Fresh is the check.
//
//	if err := products.Fresh(); err != nil { // *replica.StaleError
//		w.Header().Set("Retry-After", "1")
//		http.Error(w, err.Error(), http.StatusServiceUnavailable)
//		return
//	}
//	p, ok := products.Get(42)
//
// What d bounds: a read that passed Fresh returns data that held
// everything committed up to at most d ago, plus the time one
// confirmation takes to arrive (a keepalive's trip from the server).
// What it does not: the commit-to-visible lag of a busy stream
// (replica_lag_seconds), a server that has itself fallen behind
// (freshness is the server's word on what it has decoded and sent), or
// a commit not yet flushed: the server decodes WAL once it is flushed,
// so with synchronous_commit=off a commit may be visible in Postgres up
// to 3 x wal_writer_delay before the stream can carry it.
// Once the stream is back, the table is fresh again only when the
// source has caught up. d must be longer than the interval at which an
// idle source confirms (the constructor refuses less); a few times it
// rides out a slow round trip without flapping.
//
// # Tables
//
// PostgresSource follows tables and partitioned tables. Before its first
// load, Run fails with an error wrapping ErrUnsupportedTable, which names
// the table and says what to change, for a table it cannot follow: a
// view (bind the tables it reads), a foreign,
// unlogged or temporary table (not in the WAL logical replication
// decodes), one whose replica identity cannot say which row an update or
// delete changes, or one whose key function needs more than a delete
// carries (checked on the first rows of each load). It checks before it
// adds a table to the publication: a table without a replica identity in
// a publication that publishes updates makes its UPDATEs fail.
//
// A table's replica identity (ALTER TABLE ... REPLICA IDENTITY) is what
// its updates and deletes carry of the old row, and means, for the
// replica:
//
//   - DEFAULT, with a primary key: deletes and key changes carry the
//     primary key's columns (the Row of a delete has only those), so the
//     key function must need no others. An update does not carry a value
//     stored out of line (TOAST: large text, bytea, jsonb, arrays) that
//     it left unchanged; the source fills it in from its own copy: it
//     keeps, for every row, the values of the columns that can be stored
//     so (strings and byte slices are shared with what decode keeps of
//     them as they are, so it costs little more than a pointer each). For
//     a row it does not hold, which should not happen, it resyncs
//     (ResyncUnchangedMissing).
//   - USING INDEX on a unique index of NOT NULL columns: the same, with
//     that index's columns.
//   - FULL: every update and delete carries the whole old row, so the key
//     may be any function of the row, and unchanged values come from the
//     old row (the source keeps nothing per row). A table without a
//     primary key needs it, and a key function that gives each row its
//     own key. An update that keeps the key is one upsert; one that
//     changes it, a delete of the old key and an upsert of the new.
//   - NOTHING, or DEFAULT without a primary key: not supported.
//
// What a Row holds: every column the stream carries. Stored generated
// columns are not in PostgreSQL's stream (before 18), so the snapshot
// leaves them out too: compute them in decode. Rows from the snapshot are
// copied as text and decoded by the same decoder as the stream's, so a
// row reads the same whichever way it came: domains decode as their base
// type (a domain over bigint is an int64), enums as strings, arrays,
// composites and ranges as pgx decodes them, a type pgx cannot load as
// its text. Both connections set the session's DateStyle,
// IntervalStyle, extra_float_digits, bytea_output and TimeZone, as
// PostgreSQL's own subscriber does, so the server's or database's
// defaults do not change what decodes.
//
// Shapes the stream does not carry whole, and what the source does:
//
//   - Partitioned tables: bind the root. Changes arrive under the
//     partitions' names and are applied to the root's table; a row moved
//     between partitions is a delete and an insert. A TRUNCATE of every
//     partition empties the table; of some of them, the source resyncs
//     (ResyncPartitionTruncated: it cannot tell which rows were theirs).
//     A partition attached (maybe with rows) or detached changes the
//     table's rows with no change in the stream: the source resyncs
//     (ResyncSchemaChanged) when it sees it, in the stream or in the
//     catalog.
//   - A table with inheritance children is copied without them (ONLY):
//     the stream carries the children's changes under their own names.
//   - Schema changes are not in the stream. A bound table whose columns,
//     their types or replica identity change (a column added with a
//     default changes every row), or that is dropped and made anew, makes
//     the source resync (ResyncSchemaChanged). A bound table that does not
//     exist (dropped, or not made yet) keeps the tables not Ready, with
//     why, and the source tries again until it does.
//   - A TRUNCATE, or another rewrite, that commits between the slot's
//     snapshot and the copy of a table is not visible to the snapshot
//     (TRUNCATE is not MVCC-safe); the source sees it and loads again.
//
// The source notices these from the stream's own messages (a changed
// relation, a TRUNCATE of some partitions), and from the catalog, which
// it reads at start, at every reconnect and every PostgresCatalogCheck
// (default 10 s): a change that no row change follows (a column added
// with a default, a detached partition, the publication altered) is seen
// within that interval. Every resync reloads all the source's tables from
// a new snapshot, and keeps serving the old copies, not Ready, meanwhile.
//
// # The publication
//
// The publication (PostgresPublication) decides what the stream carries.
// At start, at every reconnect and every catalog check, the source makes
// sure it carries every bound table whole (no row filter, no column
// list), publishes inserts, updates, deletes and truncates, and publishes
// partitions under their own names (publish_via_partition_root off: via
// the root, a TRUNCATE of one partition would arrive as one of the whole
// table). It creates the publication, or completes it with CREATE/ALTER
// PUBLICATION, as happens when a new version of a service binds one more
// table, when a migration drops and makes a table anew (a FOR TABLE
// publication loses it), or when someone altered it; when changes may
// have been missed meanwhile it resyncs (ResyncPublicationChanged). That
// needs the user to own the publication and the tables; one that may not
// fails Run at start with an error naming the table and the statements
// to run as the owner (ErrUnsupportedTable).
//
// # Replication slots and disk
//
// A logical replication slot makes the server keep all WAL its consumer
// has not confirmed. PostgresSource has two modes.
//
// By default the slot lives as long as Run:
//
//   - It is made at the first load, resumed from after every reconnect
//     and server restart (no reload; the server keeps the WAL meanwhile),
//     and dropped when Run returns (its ctx ended: a service that shuts
//     down). A stopped replica pins no WAL, and every start is a snapshot.
//   - A new process cannot resume from an old slot: its tables start
//     empty, and only a new slot's exported snapshot fills them
//     consistently. So a source replaces a slot of its name that nobody
//     streams from, left by a replica that did not get to drop it.
//
// Durable (PostgresPersist, with a PostgresSlot of the replica's own):
// the slot outlives Run, and the source writes its tables and the
// position they reflect to a file, so a new process starts from the file
// and the slot (see "Restart from disk"). The slot then pins, on the
// server, all WAL written since the last file, for as long as the
// replica is stopped: a service scaled down, a pod that never comes back
// with its name, a host lost with its disk. Such a slot is what fills a
// server's disk in every CDC tool. In durable mode:
//
//   - Set max_slot_wal_keep_size on the server, above the WAL written
//     while a replica is down for a restart or a deploy (WAL per minute,
//     from pg_stat_wal or pg_current_wal_lsn() read twice, times the
//     minutes): past it the server invalidates the slot, frees the WAL,
//     and the replica starts from a snapshot (DiskSlotInvalid).
//   - Watch the slots: SELECT slot_name, active,
//     pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) AS retained_bytes,
//     wal_status FROM pg_replication_slots. An inactive slot whose
//     retained bytes grow belongs to a replica that is not running: start
//     it, or drop the slot (pg_drop_replication_slot) and its file.
//     A durable source logs, when it resumes, what its slot kept while it
//     was stopped (retained_bytes, file_age).
//   - Retire a replica's name by dropping its slot: nothing else will.
//
// In both modes:
//
//   - A replica that dies without Run returning (SIGKILL, a crash, the OOM
//     killer, a lost host) leaves its slot behind, and the server keeps
//     WAL for it until a replica of that slot name starts again or the
//     slot falls max_slot_wal_keep_size behind and the server invalidates
//     it. With PostgreSQL's default max_slot_wal_keep_size = -1
//     (unlimited) that can be until the disk is full: set it on servers
//     that replicas follow, above the WAL written while a replica
//     reconnects, and watch pg_replication_slots. A running replica whose
//     slot was invalidated resyncs (ResyncSlotInvalidated).
//   - Each running replica needs its own slot name (Slot). A source never
//     streams from a slot that another connection holds, or that was made
//     anew after its last connection (the server would start it at that
//     slot's position and silently skip what lies between): it reports
//     ErrSlotInUse, stays not Ready and retries with backoff, and resyncs
//     once the other replica has stopped and dropped the slot. A second
//     replica started on a running one's slot name fails so at once; one
//     started while the first reconnects takes the slot, and the first
//     fails so instead.
//
// # Restart from disk
//
// With PostgresPersist a PostgresSource writes its tables, and the WAL
// position they reflect, to a file: when the interval has passed and the
// position moved, and when Run ends. A new process with the same options
// loads that file and streams from its position instead of copying every
// table: it is Ready once it has caught up with the server, as after a
// reconnect.
//
//	src, err := replica.NewPostgresSource(dsn, bindings,
//		replica.PostgresSlot("pricing_"+podOrdinal), // stable per replica
//		replica.PostgresPersist("/var/lib/pricing/replica.bin", time.Minute))
//
// Guarantees:
//
//   - The server is told it may recycle WAL (the slot's
//     confirmed_flush_lsn) only up to the position of the last file
//     written and synced, never up to what is only applied in memory. So
//     after any stop, a kill included, the slot still has every change the
//     file lacks, and the start applies them (and skips those the file
//     has).
//   - A write is atomic: a temporary file in the same directory, synced,
//     renamed over the old one, the directory synced; the file carries a
//     checksum. A crash mid-write leaves the last file whole. A write that
//     fails is logged and leaves the slot at the last file.
//   - A write does not hold the applier: between two transactions it
//     takes the tables' current immutable versions, and the values kept
//     for unchanged out-of-line columns (see "Tables"), whose changes the
//     applier keeps beside them until the write is done; it copies
//     nothing, and writes from another goroutine. The file is about the size of
//     the tables' rows; writing it costs a pass over them per interval,
//     and Run's end waits for the last one (a second or two per million
//     rows).
//   - The file is used only if it fits: the same server, database and
//     slot; the same bound tables with the same columns, types, replica
//     identity and partitions; the same Go key and value types; a slot
//     that exists, is not invalidated and has confirmed no further than
//     the file. Otherwise the source loads a snapshot on a new slot, logs
//     why, and DiskStart says so: DiskFileMissing, DiskFileUnreadable,
//     DiskOtherSource, DiskSchemaChanged, DiskSlotMissing,
//     DiskSlotInvalid, DiskSlotAhead. RegisterSource exports it
//     (replica_disk_start{refused}) and the last file's position
//     (replica_persisted_lsn: if it falls behind replica_applied_lsn and
//     stays, files are not being written, and the slot keeps the WAL).
//
// Rows are written with encoding/gob as decode made them: the key and
// value types must have exported fields only (or implement GobEncoder),
// which NewPostgresSource checks. The file records those types' shapes,
// so a field added or changed refuses the file; a decode function whose
// output changes with the same types is not noticed: change the file's
// path with it (a path that names the build, say). MongoSource does not
// restart from disk yet: each of its starts is a full load.
//
// # Telling when a replica has caught up
//
// A fault experiment (a killed connection, a restarted server, an
// invalidated slot) measures convergence thus:
//
//  1. After the fault's last write, read the server's position:
//     SELECT pg_current_wal_insert_lsn(). Not pg_current_wal_lsn(): with
//     synchronous_commit off, a commit returns before its record is
//     written, so the written position can stop short of it.
//  2. The replica has caught up once every table is Ready (Table.Ready,
//     replica_ready{table} = 1) and its source's AppliedLSN
//     (replica_applied_lsn{source}, in bytes) has reached that position:
//     every change to the tables that committed before it is visible.
//     PostgresWritePosition reads step 1's position and
//     PostgresSource.WaitFor waits for step 2 (see "Read-your-writes").
//  3. ResyncsByReason (replica_resyncs_total{source,reason}) tells whether
//     it got there by resuming or by a full reload; Stats (Applied,
//     LastCommit, LastLag) and replica_lag_seconds, what it cost in lag.
//
// AppliedLSN also moves with the server's keepalives while nothing
// touches the tables, so any position is reached, not only those of the
// tables' own transactions. The server decodes WAL only once it is
// flushed: with synchronous_commit=off, up to 3 x wal_writer_delay later.
//
// # Read-your-writes
//
// A service that writes a row to Postgres and then reads through its own
// replica may read before the change has arrived. To read its own write,
// it reads the server's position after the commit and waits for it:
//
//	tx.Commit(ctx)
//	pos, err := replica.PostgresWritePosition(ctx, db) // pg_current_wal_insert_lsn()
//	if err != nil { ... }
//	if err := src.WaitFor(ctx, pos); err != nil { ... } // ctx bounds the wait
//	p, _ := products.Get(42)                           // has the write
//
// WaitFor returns once AppliedLSN has reached the position and the tables
// are Ready: every change committed before it is visible. It wakes when
// the position moves (no polling). A position that no change to the
// tables reaches (a write to another table) is reached by the server's
// keepalives, which the source asks for at once when a waiter is behind,
// rather than at its next status interval. It costs nothing while no one
// waits. The position's text form, as pglogrepl.LSN prints and
// ParseLSN reads it ("0/16B3748"), suits an HTTP header: a client that
// wrote can hand it to a replica-backed service (the pricing service's
// X-Min-Position).
//
// The server streams a change only once its WAL is flushed. A commit with
// synchronous_commit = on (PostgreSQL's default) is flushed when it
// returns; with it off, up to 3 x wal_writer_delay later (600 ms by
// default), and every WaitFor for it waits that long: a writer that reads
// its writes sets it on for those transactions (SET LOCAL
// synchronous_commit = on).
//
// MongoSource has no WaitFor yet: it would compare the operation time a
// write returns with the cluster time of the events applied, and an idle
// collection's stream would need the server's post-batch resume token to
// move past a write to another collection. That is not built.
//
// # Memory
//
// A table is held whole. Stats.Bytes (replica_table_bytes{table}) and
// Stats.BytesPerRow (replica_table_bytes_per_row{table}) estimate what it
// takes: the map's entry per row (key and value, over the mean fill of a
// Go map's slots), what a sample of 256 rows references out of line
// (strings, slices, pointers, boxed values; shared ones counted once),
// a copy of the value per Index, and, under a replica identity other
// than FULL, the source's copies of the values that can be stored out of
// line (see "Tables"). It is renewed at each load and each merge of
// recent changes, never on a read. Against the live heap a load adds, it
// came within 0.83 to 1.00 for tables of 20,000 to 400,000 rows: a Go
// map's fill runs from 7/16 to 7/8 with its size, and the estimate takes
// the mean. Not counted: the delta of changes not merged yet (about the
// square root of the rows), and, while a merge or a resync runs, the old
// copy beside the new one, so a table's peak is about twice its Bytes
// for a moment.
//
// MaxBytes(n) gives a table a budget. A load that would pass it stops
// as soon as its rows do (checked every 256 rows), and a transaction
// that would make the table pass it is not applied; either ends Run with
// an error wrapping ErrMemoryBudget that names the table, the rows, the
// bytes and the budget. The tables keep what they had, not Ready. The
// process stops at a figure it chose, with a reason in its log, rather
// than growing until the kernel kills it.
//
//	customers := replica.NewTable[int64, Customer]("public.customers",
//		replica.MaxBytes(512<<20)) // fail Run past 512 MiB
//
// # Starting many replicas at once
//
// A snapshot load reads every bound table whole: a rollout of many
// replicas, or all of them resyncing after a server restart, would read
// them all at once, a full scan and a table's worth of network each. So a
// PostgresSource loads in turns (PostgresSnapshotLimit, default 2, the
// services' --snapshot-limit): before each load, the first and every
// resync's, it takes one of n session advisory locks on the connection
// that copies, and gives it back when the load ends. While every turn is
// taken it stays not Ready, its Err wraps ErrSnapshotQueued and says how
// long it has waited, and it tries again after a jittered wait (50 ms,
// doubling to 1 s). A replica that dies while loading frees its turn with
// its session: the server ends it when the connection drops (for a host
// that vanishes without closing it, once the server's TCP gives up on it,
// many minutes by default: the server's tcp_user_timeout and
// tcp_keepalives_* settings shorten that). A replica that resumes from its slot
// after a reconnect loads nothing and takes no turn.
//
// The turns are pg_try_advisory_lock(k, i), i from 0 to n-1, where k is
// the 32-bit FNV-1a hash of "replica snapshot " and the publication's
// name, as a signed integer: replicas of one publication share them, and
// those of another publication or another database (advisory locks are
// per database) do not wait for them. They show in pg_locks as locktype
// advisory, objsubid 2, objid i. Give every replica of a group the same n:
// each counts only its own n turns. Session locks need a session: the DSN
// must reach the server directly or through a pooler in session mode (a
// replication connection needs that anyway).
//
// Sizing n: with r replicas starting together and a load taking about L,
// the last is Ready after about r/n x L, and the database serves n loads
// at once, each a scan of the tables on one core and their rows over the
// network. Take the largest n the database can spare that much for (a
// quarter of its cores, say), and allow r/n x L in the start-up probe of
// the service. 0 turns the limit off.
//
//	src, err := replica.NewPostgresSource(dsn, bindings,
//		replica.PostgresSlot(podName),
//		replica.PostgresSnapshotLimit(4)) // 4 loads at once across the pods
//
// # Caveats (the report's, handled or not)
//
//   - Lag is small but real: replica_lag_seconds measures commit ->
//     visible per change.
//   - A Table supports what its structure supports: Get by key and the
//     orders of its Indexes. Anything else is a Range over all rows.
//   - Memory: a table is held whole in memory; see "Memory" for what it
//     costs, how to watch it and how to bound it.
//   - The watcher's errors must reach the request handlers: Err and Ready
//     say why a table is not current, and Fresh bounds how old the data
//     a handler serves may be ("Bounded staleness").
//   - The first load takes time, and readiness must wait for it: Ready and
//     WaitReady do; a durable replica restarts from its file instead
//     ("Restart from disk").
//   - Many instances starting at once load the database with their
//     snapshots: they load in turns ("Starting many replicas at once").
package replica
