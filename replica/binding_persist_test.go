package replica

import (
	"encoding/gob"
	"io"
	"testing"
	"time"
)

// TestHeldFrozenWhileWritten: while a restart file's writer reads a
// binding's held values, transactions change them beside it (the
// writer's map stays as imaged) and updates read the changes; once
// thawed, the changes are in held.
func TestHeldFrozenWhileWritten(t *testing.T) {
	tb := NewTable[int32, string]("t")
	b := Bind(tb, func(r Row) (int32, error) { return r["id"].(int32), nil },
		func(r Row) (string, error) { return r["body"].(string), nil }).(*binding[int32, string])
	b.beginLoad(rowShape{held: []string{"body"}})
	for id, body := range map[int32]string{1: "one", 2: "two", 3: "three"} {
		if err := b.loadRow(Row{"id": id, "body": body}); err != nil {
			t.Fatal(err)
		}
	}
	b.finishLoad(time.Now())

	img := b.image().(*tableImageOf[int32, string])
	if err := b.update(nil, Row{"id": int32(1), "body": "uno"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.remove(Row{"id": int32(2)}); err != nil {
		t.Fatal(err)
	}
	b.flush(time.Now())
	// An update that leaves body unchanged: it comes from the change made
	// while the writer read held.
	if err := b.update(nil, Row{"id": int32(1)}, []string{"body"}); err != nil {
		t.Fatal(err)
	}
	b.flush(time.Now())
	if v, _ := tb.Get(1); v != "uno" {
		t.Errorf("row 1 = %q, want the value changed while held was frozen", v)
	}
	if err := b.update(nil, Row{"id": int32(2)}, []string{"body"}); err == nil {
		t.Error("row 2, deleted while held was frozen, still has held values")
	}
	b.reset()
	if img.held[1][0] != "one" || img.held[2] == nil {
		t.Errorf("the writer's held values changed under it: %v", img.held)
	}
	if err := img.write(gob.NewEncoder(io.Discard), func(v []any) ([][]byte, error) { return [][]byte{[]byte(v[0].(string))}, nil }); err != nil {
		t.Fatal(err)
	}

	b.thawHeld()
	if got := b.held[1][0]; got != "uno" {
		t.Errorf("after thawing, held row 1 = %v", got)
	}
	if _, ok := b.held[2]; ok {
		t.Error("after thawing, held still has row 2")
	}
}
