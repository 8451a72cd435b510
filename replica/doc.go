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
// has not confirmed. PostgresSource's policy:
//
//   - The slot lives as long as Run. It is made at the first load, resumed
//     from after every reconnect and server restart (no reload; the server
//     keeps the WAL meanwhile), and dropped when Run returns (its ctx
//     ended: a service that shuts down). A stopped replica pins no WAL.
//   - A new process cannot resume from an old slot: its tables start
//     empty, and only a new slot's exported snapshot fills them
//     consistently. So a source replaces a slot of its name that nobody
//     streams from, left by a replica that did not get to drop it.
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
//  3. ResyncsByReason (replica_resyncs_total{source,reason}) tells whether
//     it got there by resuming or by a full reload; Stats (Applied,
//     LastCommit, LastLag) and replica_lag_seconds, what it cost in lag.
//
// AppliedLSN also moves with the server's keepalives while nothing
// touches the tables, so any position is reached, not only those of the
// tables' own transactions. The server decodes WAL only once it is
// flushed: with synchronous_commit=off, up to 3 x wal_writer_delay later.
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
//   - Memory: a table is held whole, plus a delta of recent changes until
//     it is merged (at about the square root of the table's rows), plus,
//     under a replica identity other than FULL, the values of its columns
//     that can be stored out of line (see "Tables").
package replica
