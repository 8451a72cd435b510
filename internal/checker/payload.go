package checker

import (
	"fmt"
	"math/rand/v2"
)

// Payload is what the messages' values hold (Config.Payload).
type Payload string

const (
	// Zeros: every value is MessageBytes zero bytes, one shared slice
	// (the checker's original values, and the cheapest to make). Any
	// codec shrinks them to almost nothing.
	Zeros Payload = "zeros"
	// Text: values like an event serialized as JSON (a user, an event
	// name, a page, a timestamp), padded or cut to MessageBytes. They
	// differ from one message to the next, and compress as such records
	// do: their keys and vocabulary repeat across a batch.
	Text Payload = "text"
	// Random: random bytes, a different value per message: no codec
	// shrinks them (franz-go then sends the batch uncompressed).
	Random Payload = "random"
)

// Payloads lists the payloads.
var Payloads = []Payload{Zeros, Text, Random}

// payloadValues is how many distinct values Text and Random cycle
// through: their bytes (16,384 values of 100 bytes: 1.6 MB) exceed the
// largest batch the gateway's producers make (1 MiB), so that a batch
// does not hold the same value twice from one stream.
const payloadValues = 1 << 14

// values holds the messages' values, made once per run and read-only.
type values struct {
	all [][]byte
}

func newValues(p Payload, size int) values {
	if p == Zeros || p == "" {
		return values{all: [][]byte{make([]byte, size)}}
	}
	r := rand.New(rand.NewPCG(uint64(size), 29)) // the same values every run
	v := values{all: make([][]byte, payloadValues)}
	buf := make([]byte, payloadValues*size)
	for i := range v.all {
		b := buf[i*size : (i+1)*size : (i+1)*size]
		if p == Random {
			for j := range b {
				b[j] = byte(r.Uint32())
			}
		} else {
			fillText(b, r)
		}
		v.all[i] = b
	}
	return v
}

// of is the value of stream's message seq: streams start at different
// values, so that streams sharing a batch (aggregation) do not repeat
// one another's.
func (v values) of(stream int, seq int64) []byte {
	if len(v.all) == 1 {
		return v.all[0]
	}
	return v.all[(int64(stream)*7919+seq)%int64(len(v.all))]
}

var (
	textEvents = []string{"page_view", "click", "add_to_cart", "checkout", "search", "login", "logout", "purchase"}
	textPages  = []string{"/", "/catalog", "/catalog/item", "/cart", "/checkout", "/account", "/search", "/orders"}
)

// fillText fills b with one event as JSON, repeated until b is full.
func fillText(b []byte, r *rand.Rand) {
	ev := fmt.Sprintf(`{"user_id":%d,"session":"%08x","event":"%s","page":"%s/%d","ts":%d,"ok":%t}`,
		r.IntN(1_000_000), r.Uint32(), textEvents[r.IntN(len(textEvents))], textPages[r.IntN(len(textPages))],
		r.IntN(10_000), 1_700_000_000_000+r.Int64N(100_000_000), r.IntN(10) > 0)
	for n := 0; n < len(b); {
		n += copy(b[n:], ev)
	}
}
