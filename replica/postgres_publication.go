package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The publication decides what the slot's stream carries. A source uses
// one that exists as it finds it only if it carries every bound table
// whole, with every operation, and partitions under their own names;
// otherwise the table would load from the snapshot and then never change
// while it said it was Ready. It completes what is missing, and when
// changes may have been lost meanwhile (not at the first load) the caller
// resyncs.

// allOps is what a publication must publish for a replica to stay exact.
const allOps = "insert, update, delete, truncate"

// pubFix is what a publication lacks and the statements that add it.
type pubFix struct {
	lacks []string // in words, for logs and errors
	stmts []string
}

// planPublication reads the publication and returns what it lacks for
// tables (nothing: the publication is right as it is).
func (s *PostgresSource) planPublication(ctx context.Context, conn *pgx.Conn, tables map[string]*pgTable) (pubFix, error) {
	var fix pubFix
	pub := pgx.Identifier{s.cfg.publication}.Sanitize()
	var (
		oid                             uint32
		all, ins, upd, del, trunc, root bool
	)
	err := conn.QueryRow(ctx, `SELECT oid, puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_publication WHERE pubname = $1`,
		s.cfg.publication).Scan(&oid, &all, &ins, &upd, &del, &trunc, &root)
	names := slices.Sorted(maps.Keys(tables))
	if errors.Is(err, pgx.ErrNoRows) {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = quoteTable(n)
		}
		fix.lacks = append(fix.lacks, "publication "+s.cfg.publication+" does not exist")
		fix.stmts = append(fix.stmts, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = '%s', publish_via_partition_root = false)",
			pub, strings.Join(quoted, ", "), allOps))
		return fix, nil
	}
	if err != nil {
		return fix, fmt.Errorf("read publication %s: %w", s.cfg.publication, err)
	}
	var set []string
	if !(ins && upd && del && trunc) {
		fix.lacks = append(fix.lacks, fmt.Sprintf("publication %s does not publish every operation (insert %v, update %v, delete %v, truncate %v)", s.cfg.publication, ins, upd, del, trunc))
		set = append(set, "publish = '"+allOps+"'")
	}
	if root && s.partitions(tables) {
		// Through the root, a TRUNCATE of one partition arrives as one of
		// the whole table.
		fix.lacks = append(fix.lacks, "publication "+s.cfg.publication+" publishes partitions as their root (publish_via_partition_root)")
		set = append(set, "publish_via_partition_root = false")
	}
	if len(set) > 0 {
		fix.stmts = append(fix.stmts, fmt.Sprintf("ALTER PUBLICATION %s SET (%s)", pub, strings.Join(set, ", ")))
	}
	if all {
		return fix, nil // every table, whole
	}
	schemas := pgVersion(conn) >= 15
	for _, name := range names {
		t := tables[name]
		var covered bool
		// The table is published through itself, an ancestor (a
		// partition's), or its or an ancestor's schema.
		// pg_partition_ancestors lists nothing for a table that is not
		// partitioned or a partition.
		q := `EXISTS (SELECT 1 FROM pg_publication_rel WHERE prpubid = $1 AND prrelid IN (SELECT $2 UNION SELECT relid::oid FROM pg_partition_ancestors($2::oid::regclass)))`
		if schemas {
			q += ` OR EXISTS (SELECT 1 FROM pg_publication_namespace WHERE pnpubid = $1 AND pnnspid IN
				(SELECT c.relnamespace FROM pg_class c WHERE c.oid IN (SELECT $2 UNION SELECT relid::oid FROM pg_partition_ancestors($2::oid::regclass))))`
		}
		if err := conn.QueryRow(ctx, "SELECT "+q, oid, t.oid).Scan(&covered); err != nil {
			return fix, fmt.Errorf("read publication %s: %w", s.cfg.publication, err)
		}
		// Row filters and column lists (PostgreSQL 15) publish part of a
		// table; read through to_jsonb, so the query runs on older servers.
		rows, err := conn.Query(ctx, `SELECT n.nspname || '.' || c.relname FROM pg_publication_rel pr, pg_class c, pg_namespace n
			WHERE pr.prpubid = $1 AND pr.prrelid IN (SELECT $2 UNION SELECT relid::oid FROM pg_partition_ancestors($2::oid::regclass))
			AND c.oid = pr.prrelid AND n.oid = c.relnamespace
			AND (to_jsonb(pr) ->> 'prqual' IS NOT NULL OR to_jsonb(pr) ->> 'prattrs' IS NOT NULL)`, oid, t.oid)
		if err != nil {
			return fix, fmt.Errorf("read publication %s: %w", s.cfg.publication, err)
		}
		partial, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fix, fmt.Errorf("read publication %s: %w", s.cfg.publication, err)
		}
		for _, p := range partial {
			fix.lacks = append(fix.lacks, fmt.Sprintf("publication %s publishes only some rows or columns of %s", s.cfg.publication, p))
			fix.stmts = append(fix.stmts, fmt.Sprintf("ALTER PUBLICATION %s DROP TABLE %s", pub, quoteTable(p)))
		}
		if !covered || len(partial) > 0 {
			if !covered {
				fix.lacks = append(fix.lacks, fmt.Sprintf("table %s is not in publication %s", name, s.cfg.publication))
			}
			fix.stmts = append(fix.stmts, fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", pub, quoteTable(name)))
		}
	}
	return fix, nil
}

// partitions reports whether a bound table is partitioned or a partition.
func (s *PostgresSource) partitions(tables map[string]*pgTable) bool {
	for _, t := range tables {
		if t.partitioned || t.partition {
			return true
		}
	}
	return false
}

// ensurePublication makes the publication carry every bound table whole.
// It returns what it lacked ("" when nothing). A publication this user
// may not change is an ErrUnsupportedTable, with the statements its owner
// can run.
func (s *PostgresSource) ensurePublication(ctx context.Context, conn *pgx.Conn, tables map[string]*pgTable) (string, error) {
	fix, err := s.planPublication(ctx, conn, tables)
	if err != nil || len(fix.stmts) == 0 {
		return "", err
	}
	lacks := strings.Join(fix.lacks, "; ")
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, stmt := range fix.stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return "", fmt.Errorf("%w: %s, and this user may not change it (%s); as the owner of the publication and the tables, run: %s",
			ErrUnsupportedTable, lacks, pgErr.Message, strings.Join(fix.stmts, "; "))
	}
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", lacks, strings.Join(fix.stmts, "; "), err)
	}
	s.cfg.logger.Warn("replica: publication completed", "publication", s.cfg.publication, "lacked", lacks, "ran", strings.Join(fix.stmts, "; "))
	return lacks, nil
}

// pgVersion is the server's major version (0 if it does not say).
func pgVersion(conn *pgx.Conn) int {
	v := conn.PgConn().ParameterStatus("server_version")
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
