package catalog

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/highload-lab/hlab/internal/jsonappend"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// A customer's answer is written tens of thousands of times a second:
// encoding/json (its reflection, its Encoder, an allocation or two) was
// some 3% of a request's CPU under load, beside 1% now. appendCustomer
// writes the same bytes by hand (jsonappend) into a pooled buffer:
// encoding/json's Encoder output exactly (fields in the struct's order
// under their tags' names, HTML escaping on, a newline after), which
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
	if !jsonappend.TimeOK(c.UpdatedAt) {
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
// pass jsonappend.TimeOK.
func appendCustomer(b []byte, c refdata.Customer) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(c.ID), 10)
	b = append(b, `,"name":`...)
	b = jsonappend.String(b, c.Name)
	b = append(b, `,"region":`...)
	b = jsonappend.String(b, c.Region)
	b = append(b, `,"email":`...)
	b = jsonappend.String(b, c.Email)
	b = append(b, `,"phone":`...)
	b = jsonappend.String(b, c.Phone)
	b = append(b, `,"credit_limit_cents":`...)
	b = strconv.AppendInt(b, c.CreditLimitCents, 10)
	b = append(b, `,"updated_at":`...)
	b = jsonappend.Time(b, c.UpdatedAt)
	return append(b, "}\n"...)
}
