package jsonappend

import (
	"encoding/json"
	"testing"
	"time"
)

var trickyStrings = []string{
	"", "plain", `quote " and backslash \`, "<script>&amp;</script>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "héllo wörld ✓ 日本語 🎉", "line\u2028sep\u2029para", "bad \xff\xfe utf-8 \xc3",
	"\xed\xa0\x80 surrogate", string(make([]byte, 300)),
}

func TestStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestTime: where TimeOK holds, Time writes what MarshalJSON writes;
// where it does not, MarshalJSON fails.
func TestTime(t *testing.T) {
	for _, at := range []time.Time{
		{}, time.Date(2025, 1, 3, 22, 41, 0, 0, time.UTC), time.Date(2025, 1, 3, 22, 41, 0, 123456789, time.FixedZone("MSK", 3*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600)),
	} {
		want, err := at.MarshalJSON()
		if ok := TimeOK(at); ok != (err == nil) {
			t.Errorf("TimeOK(%v) = %v, MarshalJSON's error %v", at, ok, err)
			continue
		}
		if err == nil && string(Time(nil, at)) != string(want) {
			t.Errorf("Time(%v) = %s, want %s", at, Time(nil, at), want)
		}
	}
}
