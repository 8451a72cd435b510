package catalog

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/highload-lab/hlab/internal/services/refdata"
)

// A customer's answer is written tens of thousands of times a second:
// encoding/json (its reflection, its Encoder, an allocation or two) was
// some 3% of a request's CPU under load, beside 1% now. appendCustomer
// writes the same bytes by hand into a pooled buffer: encoding/json's
// Encoder output exactly (fields in the struct's order under their tags'
// names, HTML escaping on, a newline after), which
// TestEncodingMatchesEncodingJSON holds on the seed and on strings that
// need escaping.

// jsonContentType is the answer's Content-Type, shared by every answer:
// a full slice, so a wrapper's Add copies rather than writes into it.
var jsonContentType = []string{"application/json"}

// bufs holds answer buffers; one larger than maxPooled is dropped rather
// than kept for every later answer.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooled = 64 << 10

// writeCustomer answers c as JSON.
func writeCustomer(w http.ResponseWriter, c refdata.Customer) {
	if !strictTime(c.UpdatedAt) {
		writeJSON(w, c) // encoding/json's own answer (and error) for a time it cannot write
		return
	}
	bp := bufs.Get().(*[]byte)
	b := appendCustomer((*bp)[:0], c)
	w.Header()["Content-Type"] = jsonContentType[:1:1]
	w.Write(b)
	if cap(b) <= maxPooled {
		*bp = b
		bufs.Put(bp)
	}
}

// writeJSON answers v as JSON through encoding/json.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header()["Content-Type"] = jsonContentType[:1:1]
	json.NewEncoder(w).Encode(v)
}

// appendCustomer appends c as json.Encoder writes it; c.UpdatedAt must
// pass strictTime.
func appendCustomer(b []byte, c refdata.Customer) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(c.ID), 10)
	b = append(b, `,"name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"region":`...)
	b = appendString(b, c.Region)
	b = append(b, `,"email":`...)
	b = appendString(b, c.Email)
	b = append(b, `,"phone":`...)
	b = appendString(b, c.Phone)
	b = append(b, `,"credit_limit_cents":`...)
	b = strconv.AppendInt(b, c.CreditLimitCents, 10)
	b = append(b, `,"updated_at":"`...)
	b = c.UpdatedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, "\"}\n"...)
}

// strictTime reports whether time.Time.MarshalJSON writes t (as
// RFC3339Nano) rather than failing: a four-digit year and a zone offset
// within a day.
func strictTime(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*3600 && off < 24*3600
}

// appendString appends s quoted as encoding/json does with HTML escaping:
// <, > and & as \u003c..., control bytes escaped, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
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
			case '\\', '"':
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
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
