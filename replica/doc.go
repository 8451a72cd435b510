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
//		replica.Bind(products,
//			func(r replica.Row) (int64, error) { return r["id"].(int64), nil },
//			decodeProduct),
//	}, replica.PostgresSlot("pricing_1"))
//	if err != nil { ... }
//	go src.Run(ctx)
//	if err := products.WaitReady(ctx); err != nil { ... } // the snapshot is loaded
//
//	p, ok := products.Get(42)                  // lock-free, no allocation
//	byName.AscendFrom(Product{Name: "m"}, ...) // sorted and range reads
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
//   - A row that fails to decode is logged with its key, counted
//     (DecodeErrors, replica_decode_errors_total) and skipped; it never
//     stops the applier.
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
// # Caveats (the report's, handled or not)
//
//   - Lag is small but real: replica_lag_seconds measures commit ->
//     visible per change.
//   - A Table supports what its structure supports: Get by key and the
//     orders of its Indexes. Anything else is a Range over all rows.
//   - Memory: a table is held whole, plus a delta of recent changes until
//     it is merged (at about the square root of the table's rows).
//   - Unchanged TOAST values are not in Postgres' change stream; with the
//     default replica identity, an update that leaves a large value
//     untouched gives a row without that column (decode may then fail and
//     is counted). Use REPLICA IDENTITY FULL for such tables.
package replica
