package checker

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// TestPayloadsCompressAsNamed: a batch's worth of values of each payload
// compresses as its name says: zeros to nothing, text several times, random
// not at all; text and random values differ from message to message.
func TestPayloadsCompressAsNamed(t *testing.T) {
	for _, c := range []struct {
		p        Payload
		min, max float64 // compressed over raw
	}{
		{Zeros, 0, 0.05},
		{Text, 0.05, 0.5},
		{Random, 0.98, 1.1},
	} {
		v := newValues(c.p, 100)
		var raw, packed bytes.Buffer
		zw := gzip.NewWriter(&packed)
		for stream := range 4 {
			for seq := range int64(500) {
				val := v.of(stream, seq)
				if len(val) != 100 {
					t.Fatalf("%s: value of %d bytes, want 100", c.p, len(val))
				}
				raw.Write(val)
				zw.Write(val)
			}
		}
		zw.Close()
		ratio := float64(packed.Len()) / float64(raw.Len())
		t.Logf("%s: gzip %d -> %d bytes (%.3f)", c.p, raw.Len(), packed.Len(), ratio)
		if ratio < c.min || ratio > c.max {
			t.Errorf("%s compresses to %.3f of its size, want %.2f to %.2f", c.p, ratio, c.min, c.max)
		}
		if c.p != Zeros && bytes.Equal(v.of(0, 0), v.of(0, 1)) {
			t.Errorf("%s: two messages of a stream have the same value", c.p)
		}
	}
}
