package replica

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Values reach the replica as text, from the stream (pgoutput sends each
// column through its type's output function) and from the snapshot
// (copied as text for that reason), and are decoded by one decoder, so a
// row reads the same whichever way it came.

// textSession are the settings both of a source's connections start with,
// so that values arrive in the text forms the decoder reads whatever the
// server's, database's or role's defaults are: those PostgreSQL's own
// subscriber forces on its publisher (DateStyle, IntervalStyle,
// extra_float_digits, so floats are exact), bytea's hex form (pgx reads
// no other), and UTC, so no time carries a local offset.
var textSession = map[string]string{
	"datestyle":          "ISO",
	"intervalstyle":      "postgres",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
	"timezone":           "UTC",
}

// loadTypes teaches the decoder the types of the tables' columns that
// pgx does not know by itself: domains (decoded as their base type, as
// the snapshot's protocol would give them), enums (strings), composites,
// ranges and arrays of them. A type that does not load is decoded as its
// text, from the snapshot and the stream alike.
func (s *PostgresSource) loadTypes(ctx context.Context, conn *pgx.Conn, tables map[string]*pgTable) {
	var names []string
	for _, t := range tables {
		for _, c := range t.columns {
			if _, ok := s.typeMap.TypeForOID(c.typ); !ok && !slices.Contains(names, c.typName) {
				names = append(names, c.typName)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	types, err := conn.LoadTypes(ctx, names)
	if err != nil {
		s.cfg.logger.Warn("replica: column types not loaded: their values are decoded as text", "types", names, "err", err)
		return
	}
	s.typeMap.RegisterTypes(types)
}

func (s *PostgresSource) decodeText(data []byte, oid uint32) (any, error) {
	if t, ok := s.typeMap.TypeForOID(oid); ok {
		return t.Codec.DecodeValue(s.typeMap, oid, pgtype.TextFormatCode, data)
	}
	return string(data), nil
}

// textRow decodes a snapshot row of cols (nil: NULL).
func (s *PostgresSource) textRow(cols []pgColumn, raw [][]byte) (Row, error) {
	r := make(Row, len(cols))
	for i, c := range cols {
		if raw[i] == nil {
			r[c.name] = nil
			continue
		}
		v, err := s.decodeText(raw[i], c.typ)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.name, err)
		}
		r[c.name] = v
	}
	return r, nil
}

// tupleRow decodes a tuple of the stream. identityOnly keeps only the
// columns of the replica identity (the rest of a key tuple is NULL). It
// also returns the columns the tuple left out because an update left
// them unchanged (values stored out of line, TOAST).
func (s *PostgresSource) tupleRow(rel *pglogrepl.RelationMessage, tuple *pglogrepl.TupleData, identityOnly bool) (Row, []string, error) {
	row := make(Row, len(tuple.Columns))
	var unchanged []string
	for i, col := range tuple.Columns {
		if i >= len(rel.Columns) {
			break
		}
		c := rel.Columns[i]
		if identityOnly && c.Flags&1 == 0 {
			continue
		}
		switch col.DataType {
		case 'n':
			row[c.Name] = nil
		case 'u':
			unchanged = append(unchanged, c.Name)
		case 't':
			v, err := s.decodeText(col.Data, c.DataType)
			if err != nil {
				return nil, nil, fmt.Errorf("column %s: %w", c.Name, err)
			}
			row[c.Name] = v
		default:
			return nil, nil, fmt.Errorf("column %s: a value in format %q, which the source does not ask for", c.Name, col.DataType)
		}
	}
	return row, unchanged, nil
}
