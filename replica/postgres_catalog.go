package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// What the catalog says of the bound tables: whether the replica can
// follow them, which columns the change stream carries (the snapshot
// copies the same ones), and, kept from each load, what to compare the
// stream's Relation messages and later reads of the catalog with.

// pgTable is a bound table.
type pgTable struct {
	name        string // "schema.table", as bound
	oid         uint32
	partitioned bool
	partition   bool // it is itself a partition of another table
	// rels are the relations whose changes the stream carries for the
	// table, by OID: the table itself, or its leaf partitions.
	rels map[uint32]*pgRel
	// columns are those the stream carries (not dropped, not generated),
	// in the table's order.
	columns []pgColumn
	shape   rowShape
}

// pgRel is a relation whose changes the stream carries.
type pgRel struct {
	name     string // "schema.table"
	identity byte   // relreplident: 'd'efault, 'f'ull, 'i'ndex, 'n'othing
	key      []string
	// sig is its columns, their types and its replica identity, as a
	// Relation message gives them (see relSig).
	sig string
}

type pgColumn struct {
	name    string
	typ     uint32
	typName string // schema.type, to load a type the decoder does not know
}

// querier is a *pgx.Conn or a pgx.Tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// errTableMissing: a bound table is not in the catalog.
var errTableMissing = errors.New("does not exist")

// unsupported says what to change about a bound table.
func unsupported(table, format string, args ...any) error {
	return fmt.Errorf("%w: table %s %s", ErrUnsupportedTable, table, fmt.Sprintf(format, args...))
}

// readTables reads every bound table from the catalog and checks that
// the replica can follow it.
func (s *PostgresSource) readTables(ctx context.Context, q querier) (map[string]*pgTable, error) {
	tables := make(map[string]*pgTable, len(s.bindings))
	for _, name := range slices.Sorted(maps.Keys(s.bindings)) {
		t, err := readTable(ctx, q, name)
		if err != nil {
			return nil, err
		}
		tables[name] = t
	}
	return tables, nil
}

func readTable(ctx context.Context, q querier, name string) (*pgTable, error) {
	schema, table, _ := strings.Cut(name, ".")
	t := &pgTable{name: name, rels: map[uint32]*pgRel{}}
	var kind, persistence string
	err := q.QueryRow(ctx, `SELECT c.oid, c.relkind::text, c.relpersistence::text, c.relispartition FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&t.oid, &kind, &persistence, &t.partition)
	if errors.Is(err, pgx.ErrNoRows) {
		// Not ErrUnsupportedTable: a migration may be about to make it.
		return nil, fmt.Errorf("table %s %w (bind \"schema.table\", or \"table\" for the public schema; names are case-sensitive)", name, errTableMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("read table %s from the catalog: %w", name, err)
	}
	switch kind {
	case "r":
	case "p":
		t.partitioned = true
	case "v", "m":
		return nil, unsupported(name, "is a view: it has no change stream of its own; bind the tables it reads")
	case "f":
		return nil, unsupported(name, "is a foreign table: its rows live on another server, which logical replication does not follow")
	default:
		return nil, unsupported(name, "is not a table (relkind %s)", kind)
	}
	switch persistence {
	case "u":
		return nil, unsupported(name, "is unlogged: its changes are not written to the WAL that logical replication decodes; ALTER TABLE %s SET LOGGED", quoteTable(name))
	case "t":
		return nil, unsupported(name, "is temporary: only its own session sees it")
	}
	leaves := []uint32{t.oid}
	if t.partitioned {
		if leaves, err = partitionLeaves(ctx, q, t.oid); err != nil {
			return nil, fmt.Errorf("read the partitions of %s: %w", name, err)
		}
	}
	if t.columns, _, err = readColumns(ctx, q, t.oid); err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	var identity []string
	full := true
	for _, oid := range leaves {
		rel, toastable, err := readRel(ctx, q, oid)
		if err != nil {
			return nil, fmt.Errorf("read %s from the catalog: %w", name, err)
		}
		if err := rel.supported(name); err != nil {
			return nil, err
		}
		t.rels[oid] = rel
		if rel.identity != 'f' {
			// Out-of-line values an update leaves unchanged come from
			// the replica's copy of the row: only FULL sends them.
			full = false
			identity = rel.key
			for _, c := range toastable {
				if !slices.Contains(t.shape.held, c) {
					t.shape.held = append(t.shape.held, c)
				}
			}
		}
	}
	if !full {
		t.shape.identity = identity
	}
	return t, nil
}

func partitionLeaves(ctx context.Context, q querier, root uint32) ([]uint32, error) {
	rows, err := q.Query(ctx, `SELECT relid::oid FROM pg_partition_tree($1::oid::regclass) WHERE isleaf ORDER BY relid`, root)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uint32])
}

// readRel reads one relation whose changes the stream carries, and the
// columns an update may leave out when unchanged (stored out of line).
func readRel(ctx context.Context, q querier, oid uint32) (*pgRel, []string, error) {
	rel := &pgRel{}
	var identity string
	err := q.QueryRow(ctx, `SELECT n.nspname || '.' || c.relname, c.relreplident::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, oid).
		Scan(&rel.name, &identity)
	if err != nil {
		return nil, nil, err
	}
	rel.identity = identity[0]
	cols, toastable, err := readColumns(ctx, q, oid)
	if err != nil {
		return nil, nil, err
	}
	// The replica identity's columns, as pgoutput flags them.
	var keyFilter string
	switch rel.identity {
	case 'f':
		for _, c := range cols {
			rel.key = append(rel.key, c.name)
		}
	case 'd':
		keyFilter = "i.indisprimary"
	case 'i':
		keyFilter = "i.indisreplident"
	}
	if keyFilter != "" {
		rows, err := q.Query(ctx, `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
			WHERE i.indrelid = $1 AND `+keyFilter+` ORDER BY a.attnum`, oid)
		if err != nil {
			return nil, nil, err
		}
		if rel.key, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, nil, err
		}
	}
	rel.sig = relSig(rel.identity, cols, rel.key)
	return rel, toastable, nil
}

// readColumns reads the columns of a relation that the change stream
// carries, and which of them may be stored out of line (TOAST: a
// variable-length type whose storage is not plain).
func readColumns(ctx context.Context, q querier, oid uint32) (cols []pgColumn, toastable []string, err error) {
	rows, err := q.Query(ctx, `SELECT a.attname, a.atttypid, tn.nspname || '.' || t.typname, a.attlen = -1 AND a.attstorage <> 'p'
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace tn ON tn.oid = t.typnamespace
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c pgColumn
		var toast bool
		if err := rows.Scan(&c.name, &c.typ, &c.typName, &toast); err != nil {
			return nil, nil, err
		}
		cols = append(cols, c)
		if toast {
			toastable = append(toastable, c.name)
		}
	}
	return cols, toastable, rows.Err()
}

// supported says what to change when the stream cannot carry the
// relation's deletes and updates so that the replica finds their rows.
func (r *pgRel) supported(table string) error {
	has := "has"
	if r.name != table {
		has = "has a partition, " + r.name + ", with"
	}
	fix := fmt.Sprintf("add a primary key, or ALTER TABLE %s REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns, or REPLICA IDENTITY FULL (then every update and delete logs the whole old row)", quoteTable(r.name))
	switch {
	case r.identity == 'n':
		return unsupported(table, "%s REPLICA IDENTITY NOTHING, so its updates and deletes do not say which row they change (and fail once it is published); %s", has, fix)
	case r.identity == 'd' && len(r.key) == 0:
		return unsupported(table, "%s no primary key and REPLICA IDENTITY DEFAULT, so its updates and deletes do not say which row they change (and fail once it is published); %s", has, fix)
	case r.identity == 'i' && len(r.key) == 0:
		return unsupported(table, "%s a REPLICA IDENTITY index that is gone; %s", has, fix)
	}
	return nil
}

// relSig is a relation's columns (by name: their order does not matter
// to the replica), their types, which are the replica identity's, and
// the identity itself. A change in any of them means rows in the replica
// may no longer be what the table holds (a column added with a default
// changes every row without a change in the stream) or that the stream's
// updates and deletes no longer carry what the replica needs.
func relSig(identity byte, cols []pgColumn, key []string) string {
	parts := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		k := "0"
		if identity == 'f' || slices.Contains(key, c.name) {
			k = "1"
		}
		parts = append(parts, c.name+":"+strconv.FormatUint(uint64(c.typ), 10)+":"+k)
	}
	slices.Sort(parts)
	return string(identity) + "|" + strings.Join(parts, ",")
}

// messageSig is relSig of a Relation message.
func messageSig(m *pglogrepl.RelationMessage) string {
	cols := make([]pgColumn, len(m.Columns))
	var key []string
	for i, c := range m.Columns {
		cols[i] = pgColumn{name: c.Name, typ: c.DataType}
		if c.Flags&1 != 0 {
			key = append(key, c.Name)
		}
	}
	return relSig(m.ReplicaIdentity, cols, key)
}

// diffTables says how the catalog's tables now differ from those the
// replica loaded ("" if they do not): what makes its copy of them stale
// without a change in the stream.
func diffTables(loaded, now map[string]*pgTable) string {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(loaded)) {
		was, is := loaded[name], now[name]
		switch {
		case is == nil:
		case was.oid != is.oid:
			diffs = append(diffs, "table "+name+" was dropped and made anew")
		case !maps.EqualFunc(was.rels, is.rels, func(a, b *pgRel) bool { return a.sig == b.sig }):
			diffs = append(diffs, "table "+name+" changed (its columns, their types, its replica identity or its partitions)")
		}
	}
	return strings.Join(diffs, "; ")
}

// quoteTable quotes a "schema.table" name for SQL.
func quoteTable(name string) string {
	schema, table, _ := strings.Cut(name, ".")
	return pgx.Identifier{schema, table}.Sanitize()
}
