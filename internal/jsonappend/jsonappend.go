// Package jsonappend appends JSON values byte for byte as encoding/json
// writes them, for answers a service writes tens of thousands of times a
// second and encodes by hand into a reused buffer (encoding/json's
// reflection, its Encoder and their allocations cost several percent of
// such a request): the tasks API's tasks and the catalog's customers.
// Their tests compare each hand-written answer with encoding/json's.
package jsonappend

import (
	"time"
	"unicode/utf8"
)

// String appends s as a JSON string the way encoding/json does: quotes,
// backslashes and control characters escaped, <, > and & as \u003c etc.
// (HTML-safe), invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped
// (JavaScript line terminators).
func String(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Time appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted) for every t TimeOK accepts.
func Time(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// TimeOK reports whether time.Time's MarshalJSON writes t rather than
// failing: a four-digit year and a zone offset within a day. Where it
// fails, encoding/json fails the whole answer, which a caller leaves to
// encoding/json.
func TimeOK(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*3600 && off < 24*3600
}
