package tasks

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestNonNullDecodesAsEncodingJSON: nonNull's fast path for plain strings
// and integers gives what encoding/json gives a pointer field, values and
// refusals alike, and null is refused naming the field.
func TestNonNullDecodesAsEncodingJSON(t *testing.T) {
	type want struct {
		S *string `json:"s"`
		N *int    `json:"n"`
	}
	type got struct {
		S nonNull[string] `json:"s"`
		N nonNull[int]    `json:"n"`
	}
	for _, body := range []string{
		`{"s": "plain", "n": 3}`, `{"s": "", "n": 0}`, `{"s": "é€😀", "n": -0}`,
		`{"s": "a\"b\\c\u00e9\n"}`, `{"s": "\ud800 lone surrogate"}`, "{\"s\": \"bad \xff byte\"}",
		`{"n": 9223372036854775807}`, `{"n": 9223372036854775808}`, `{"n": 1.5}`, `{"n": 1e2}`, `{"n": -12}`,
		`{"s": 5}`, `{"n": "5"}`, `{"s": true}`, `{"n": [1]}`, `{"s": {}}`,
	} {
		var w want
		werr := json.Unmarshal([]byte(body), &w)
		var g got
		gerr := json.Unmarshal([]byte(body), &g)
		// As a client sees it: the answer's error (the Go struct's
		// name in the error's text differs).
		if (werr == nil) != (gerr == nil) || (werr != nil && *decodeError(werr, 1<<10).(*InputError) != *decodeError(gerr, 1<<10).(*InputError)) {
			t.Errorf("%s: error %v, encoding/json's %v", body, gerr, werr)
			continue
		}
		if !reflect.DeepEqual(g.S.v, w.S) || !reflect.DeepEqual(g.N.v, w.N) {
			t.Errorf("%s: decoded %v %v, encoding/json %v %v", body, g.S.v, g.N.v, w.S, w.N)
		}
	}
	var g got
	err := json.Unmarshal([]byte(`{"s": "x", "n": null}`), &g)
	in := decodeError(err, 1<<10)
	if ie, ok := in.(*InputError); !ok || ie.Status != 422 || ie.Field != "n" {
		t.Fatalf("n null: %v, want a 422 on n", in)
	}
}
