package tasks

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rules of a request body's fields that every handler shares.

// nonNull is a body field that may be left out but not sent as null.
// encoding/json leaves a pointer nil for both, so a *string field would
// take {"status": null} for "not sent": a create would store the
// default, and an update would keep the old value, of a value the
// description says is a string. A null here is refused as invalid_field
// (decodeError), naming the field.
type nonNull[T any] struct{ v *T }

func (f *nonNull[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		// An *UnmarshalTypeError, so that encoding/json adds the field's
		// name to it.
		return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[T]()}
	}
	f.v = new(T)
	// The common values, a plain string or an integer, without a second
	// decoder: it would double a body's decoding cost. b is one valid
	// JSON value (the outer decoder checked it); anything else, escapes
	// and wrong types included, goes through encoding/json, with its
	// errors.
	switch p := any(f.v).(type) {
	case *string:
		if s, ok := plainJSONString(b); ok {
			*p = s
			return nil
		}
	case *int:
		if n, err := strconv.Atoi(string(b)); err == nil {
			*p = n
			return nil
		}
	}
	return json.Unmarshal(b, f.v)
}

// plainJSONString returns the string a JSON string literal without
// escapes holds: its bytes, when they are valid UTF-8 (encoding/json
// replaces invalid bytes with U+FFFD).
func plainJSONString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// or returns the field's value, or def when it was left out.
func (f nonNull[T]) or(def T) T {
	if f.v == nil {
		return def
	}
	return *f.v
}

// noNUL refuses text that holds the NUL character (U+0000): Postgres's
// text cannot store it, and would fail the write (SQLSTATE 22021, a 500)
// instead of refusing the input.
func noNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "must not contain the NUL character (U+0000), which the database cannot store")
	}
	return nil
}
