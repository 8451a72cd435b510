package replica_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/highload-lab/hlab/replica"
)

// The property: whatever the schema (of the types the decoder supports)
// and the replica identity, after any sequence of inserts, updates, key
// changes, deletes and truncates, across the snapshot, the stream and a
// killed replication connection, a replica that is Ready and caught up
// equals Postgres row for row. Postgres' rows are read independently of
// the replica's decoder (pgx's binary protocol) and both sides are
// written in one canonical form.

const (
	propertySeed = 27
	propertyRows = 100 // changes to each table before the first phase
	propertyTxs  = 150 // transactions in each of three phases
)

// propColumn is a column of a random table: its SQL type and a generator
// of SQL literals for it.
type propColumn struct {
	name, typ string
	gen       func(r *rand.Rand) string
}

// propTypes are the value columns' types.
var propTypes = []struct {
	typ string
	gen func(r *rand.Rand) string
}{
	{"numeric(12,3)", func(r *rand.Rand) string { return fmt.Sprintf("%d.%03d", r.IntN(2e6)-1e6, r.IntN(1000)) }},
	{"jsonb", func(r *rand.Rand) string {
		return fmt.Sprintf(`'{"n": %d, "s": "v%d", "a": [1, "x", null, %v], "o": {"k": %g}}'`, r.IntN(100), r.IntN(9), r.IntN(2) == 0, r.Float64())
	}},
	{"int[]", func(r *rand.Rand) string { return fmt.Sprintf("'{%d,%d,%d}'", r.IntN(99), r.IntN(99)-50, r.IntN(9)) }},
	{"text[]", func(r *rand.Rand) string { return fmt.Sprintf(`'{"a %d","b,c",NULL}'`, r.IntN(9)) }},
	{"mood", func(r *rand.Rand) string { return "'" + []string{"happy", "sad", "ok"}[r.IntN(3)] + "'" }},
	{"mood[]", func(r *rand.Rand) string { return "'{" + []string{"happy", "sad", "ok"}[r.IntN(3)] + ",ok}'" }},
	{"label", func(r *rand.Rand) string { return fmt.Sprintf("'label %d'", r.IntN(1000)) }},
	{"bytea", func(r *rand.Rand) string {
		b := make([]byte, 1+r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return `'\x` + hex.EncodeToString(b) + `'`
	}},
	{"timestamptz", func(r *rand.Rand) string {
		return "'" + time.Unix(r.Int64N(2e9), r.Int64N(1e6)*1000).UTC().Format("2006-01-02 15:04:05.999999Z07:00") + "'"
	}},
	{"uuid", func(r *rand.Rand) string {
		return fmt.Sprintf("'%08x-0000-4000-8000-%012x'", r.Uint32(), r.Uint64()>>16)
	}},
	{"float8", func(r *rand.Rand) string { return strconv.FormatFloat(r.NormFloat64()*1e3, 'g', -1, 64) }},
	{"bool", func(r *rand.Rand) string { return strconv.FormatBool(r.IntN(2) == 0) }},
	{"text", func(r *rand.Rand) string { return fmt.Sprintf("'t%d ''quoted'' \\ é'", r.IntN(1e4)) }},
	{"date", func(r *rand.Rand) string {
		return fmt.Sprintf("'20%02d-%02d-%02d'", r.IntN(40), 1+r.IntN(12), 1+r.IntN(28))
	}},
	{"interval", func(r *rand.Rand) string {
		return fmt.Sprintf("'%d mons %d days %d:%02d:%02d.5'", r.IntN(20), r.IntN(40), r.IntN(30), r.IntN(60), r.IntN(60))
	}},
	// Over 2 KB and incompressible: stored out of line (TOAST).
	{"text", func(r *rand.Rand) string {
		return fmt.Sprintf("(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, %d))", 80+r.IntN(400))
	}},
}

// propKeyTypes are the key column's types, each with the literal of key n.
var propKeyTypes = []struct {
	typ string
	lit func(n int) string
}{
	{"bigint", strconv.Itoa},
	{"int", strconv.Itoa},
	{"text", func(n int) string { return fmt.Sprintf("'key %d'", n) }},
	{"uuid", func(n int) string { return fmt.Sprintf("'00000000-0000-4000-8000-%012d'", n) }},
	{"thing_id", strconv.Itoa}, // a domain over bigint
}

// propTable is a random table under one replica identity. Its rows are
// identified in the test by a number n: the key columns hold key(n) (and
// n % 7 in a second key column, if any); under USING INDEX the identity
// is a unique "code" column, changed independently.
type propTable struct {
	name, identity string
	keyType        int
	twoKeys        bool
	cols           []propColumn
	live           map[int]int // n -> code
	next           int
	// kinds counts the changes made, by kind; noTruncate leaves out
	// TRUNCATE, so the last phase ends with the table's rows.
	kinds      map[string]int
	noTruncate bool
}

func newPropTable(r *rand.Rand, identity string) *propTable {
	t := &propTable{name: "p_" + identity, identity: identity, keyType: r.IntN(len(propKeyTypes)), twoKeys: r.IntN(2) == 0, live: map[int]int{}, kinds: map[string]int{}}
	perm := r.Perm(len(propTypes))
	for i, ti := range perm[:5+r.IntN(5)] {
		t.cols = append(t.cols, propColumn{name: fmt.Sprintf("c%d", i), typ: propTypes[ti].typ, gen: propTypes[ti].gen})
	}
	// Always one large value, so updates leave TOAST values unchanged.
	big := propTypes[len(propTypes)-1]
	t.cols = append(t.cols, propColumn{name: "big", typ: big.typ, gen: big.gen})
	return t
}

func (t *propTable) keyCols() []string {
	if t.identity == "index" {
		return []string{"code"}
	}
	if t.twoKeys {
		return []string{"k1", "k2"}
	}
	return []string{"k1"}
}

func (t *propTable) ddl() string {
	kt := propKeyTypes[t.keyType].typ
	cols := []string{"k1 " + kt + " NOT NULL", "k2 int NOT NULL"}
	for _, c := range t.cols {
		cols = append(cols, c.name+" "+c.typ)
	}
	pk := "k1"
	if t.twoKeys {
		pk = "k1, k2"
	}
	switch t.identity {
	case "default":
		cols = append(cols, "PRIMARY KEY ("+pk+")")
		return fmt.Sprintf("CREATE TABLE %s (%s)", t.name, strings.Join(cols, ", "))
	case "full": // no primary key: FULL is what tables without one use
		cols = append(cols, "UNIQUE ("+pk+")")
		return fmt.Sprintf("CREATE TABLE %s (%s); ALTER TABLE %[1]s REPLICA IDENTITY FULL", t.name, strings.Join(cols, ", "))
	default:
		cols = append(cols, "code bigint NOT NULL", "PRIMARY KEY ("+pk+")", "CONSTRAINT "+t.name+"_code UNIQUE (code)")
		return fmt.Sprintf("CREATE TABLE %s (%s); ALTER TABLE %[1]s REPLICA IDENTITY USING INDEX %[1]s_code", t.name, strings.Join(cols, ", "))
	}
}

func (t *propTable) where(n int) string {
	return fmt.Sprintf("k1 = %s", propKeyTypes[t.keyType].lit(n))
}

// op returns one random change to t, and applies it to t's model.
func (t *propTable) op(r *rand.Rand) string {
	pick := func() (int, bool) {
		if len(t.live) == 0 {
			return 0, false
		}
		keys := slices.Sorted(func(yield func(int) bool) {
			for k := range t.live {
				if !yield(k) {
					return
				}
			}
		})
		return keys[r.IntN(len(keys))], true
	}
	p := r.IntN(1000)
	n, ok := pick()
	switch {
	case p < 480 || !ok: // insert
		t.kinds["insert"]++
		t.next++
		n := t.next
		t.live[n] = n
		names := []string{"k1", "k2"}
		vals := []string{propKeyTypes[t.keyType].lit(n), strconv.Itoa(n % 7)}
		for _, c := range t.cols {
			names = append(names, c.name)
			vals = append(vals, t.value(r, c))
		}
		if t.identity == "index" {
			names, vals = append(names, "code"), append(vals, strconv.Itoa(n))
		}
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t.name, strings.Join(names, ", "), strings.Join(vals, ", "))
	case p < 700: // update some columns, often leaving the large one alone
		t.kinds["update"]++
		var sets []string
		for _, c := range t.cols {
			if r.IntN(3) == 0 && (c.name != "big" || r.IntN(3) == 0) {
				sets = append(sets, c.name+" = "+t.value(r, c))
			}
		}
		if len(sets) == 0 {
			sets = append(sets, t.cols[0].name+" = "+t.value(r, t.cols[0]))
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.name, strings.Join(sets, ", "), t.where(n))
	case p < 830: // change the key (the identity's columns), maybe more
		t.kinds["key change"]++
		t.next++
		m := t.next
		sets := []string{}
		if t.identity == "index" {
			t.live[n] = m // a new code, the same row
			sets = append(sets, fmt.Sprintf("code = %d", m))
		} else {
			delete(t.live, n)
			t.live[m] = m
			sets = append(sets, "k1 = "+propKeyTypes[t.keyType].lit(m), fmt.Sprintf("k2 = %d", m%7))
		}
		if r.IntN(2) == 0 {
			c := t.cols[r.IntN(len(t.cols)-1)] // not the large one
			sets = append(sets, c.name+" = "+t.value(r, c))
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.name, strings.Join(sets, ", "), t.where(n))
	case p < 995 || t.noTruncate:
		t.kinds["delete"]++
		delete(t.live, n)
		return fmt.Sprintf("DELETE FROM %s WHERE %s", t.name, t.where(n))
	default:
		t.kinds["truncate"]++
		clear(t.live)
		return "TRUNCATE " + t.name
	}
}

func (t *propTable) value(r *rand.Rand, c propColumn) string {
	if r.IntN(10) == 0 {
		return "NULL"
	}
	return c.gen(r)
}

// canon writes a decoded value in one form whichever protocol it came by.
func canon(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(v)
	case []byte:
		return "x" + hex.EncodeToString(v)
	case [16]byte:
		return "uuid" + hex.EncodeToString(v[:])
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case pgtype.Numeric:
		if !v.Valid || v.NaN || v.Int == nil {
			return fmt.Sprintf("numeric%+v", v)
		}
		r := new(big.Rat).SetInt(v.Int)
		e := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(v.Exp, -v.Exp))), nil)
		if v.Exp < 0 {
			r.Quo(r, new(big.Rat).SetInt(e))
		} else {
			r.Mul(r, new(big.Rat).SetInt(e))
		}
		return r.RatString()
	case map[string]any:
		b, _ := json.Marshal(v)
		return string(b)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = canon(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return fmt.Sprintf("%T:%v", v, v)
	}
}

// canonRow writes a row as "column=value" lines in column order.
func canonRow(r replica.Row) string {
	var b strings.Builder
	for _, c := range slices.Sorted(func(yield func(string) bool) {
		for c := range r {
			if !yield(c) {
				return
			}
		}
	}) {
		b.WriteString(c + "=" + canon(r[c]) + "\n")
	}
	return b.String()
}

func (t *propTable) key(r replica.Row) (string, error) {
	var parts []string
	for _, c := range t.keyCols() {
		v, ok := r[c]
		if !ok || v == nil {
			return "", fmt.Errorf("no %s", c)
		}
		parts = append(parts, canon(v))
	}
	return strings.Join(parts, "|"), nil
}

// read reads t from Postgres through pgx's binary protocol.
func (t *propTable) read(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT * FROM "+t.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	fields := rows.FieldDescriptions()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		r := replica.Row{}
		for i, f := range fields {
			r[f.Name] = vals[i]
		}
		k, err := t.key(r)
		if err != nil {
			return nil, err
		}
		out[k] = canonRow(r)
	}
	return out, rows.Err()
}

func TestReplicaMatchesPostgres(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(propertySeed, 1))
	dsn, db := emptyDB(t, `CREATE TYPE mood AS ENUM ('happy', 'sad', 'ok'); CREATE DOMAIN thing_id AS bigint CHECK (VALUE > 0);
		CREATE DOMAIN label AS text CHECK (VALUE <> '')`)
	var tables []*propTable
	var bindings []replica.Binding
	replicas := map[string]*replica.Table[string, string]{}
	for _, identity := range []string{"default", "full", "index"} {
		pt := newPropTable(r, identity)
		exec(t, db, pt.ddl())
		t.Logf("%s: %s", pt.name, pt.ddl())
		tables = append(tables, pt)
		tb := replica.NewTable[string, string](pt.name)
		replicas[pt.name] = tb
		bindings = append(bindings, replica.Bind(tb, pt.key, func(r replica.Row) (string, error) { return canonRow(r), nil }))
	}
	ops := 0
	phase := func(txs int) {
		t.Helper()
		for range txs {
			var stmts []string
			for range 1 + r.IntN(4) {
				stmts = append(stmts, tables[r.IntN(len(tables))].op(r))
			}
			ops += len(stmts)
			exec(t, db, "BEGIN; "+strings.Join(stmts, "; ")+"; COMMIT")
		}
	}
	for _, pt := range tables {
		for range propertyRows {
			exec(t, db, pt.op(rand.New(rand.NewPCG(propertySeed, uint64(pt.next)))))
		}
	}
	phase(propertyTxs) // in the snapshot
	src, err := replica.NewPostgresSource(dsn, bindings, replica.PostgresSlot("property"),
		replica.PostgresBackoff(20*time.Millisecond, 200*time.Millisecond), replica.PostgresStatusInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { src.Run(rctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	phase(propertyTxs) // around the snapshot and in the stream
	for _, tb := range replicas {
		waitReadyT(t, tb)
	}
	terminateWalsender(t, db, "property")
	for _, pt := range tables {
		pt.noTruncate = true
	}
	phase(propertyTxs) // while it reconnects and resumes
	for _, tb := range replicas {
		caughtUp(t, db, src, tb)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	types, err := conn.LoadTypes(ctx, []string{"mood", "_mood", "thing_id"})
	if err != nil {
		t.Fatal(err)
	}
	conn.TypeMap().RegisterTypes(types)
	var counts []string
	for _, pt := range tables {
		want, err := pt.read(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		tb := replicas[pt.name]
		differing := 0
		for k, w := range want {
			if got, ok := tb.Get(k); !ok || got != w {
				if differing++; differing <= 3 {
					t.Errorf("%s row %s: replica (present %v)\n%s\ndatabase\n%s", pt.name, k, ok, short(got), short(w))
				}
			}
		}
		if tb.Len() != len(want) {
			t.Errorf("%s: replica has %d rows, database %d", pt.name, tb.Len(), len(want))
		}
		counts = append(counts, fmt.Sprintf("%s %d rows (%d differing) after %v", pt.name, len(want), differing, pt.kinds))
	}
	t.Logf("seed %d, %d transactions of %d changes: %s; decode errors %d, resyncs %v",
		propertySeed, 3*propertyTxs, ops, strings.Join(counts, ", "), src.DecodeErrors(), src.ResyncsByReason())
	if n := src.DecodeErrors(); n != 0 {
		t.Errorf("%d decode errors", n)
	}
	if n := src.Resyncs(); n != 0 {
		t.Errorf("%d resyncs: nothing here needs one", n)
	}
}
