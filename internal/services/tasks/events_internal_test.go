package tasks

import (
	"encoding/json"
	"testing"
	"time"
)

// A notification's payload reads back as the event it carries, its body
// (spaces and all) whole, and a socket's message is that body with its
// seq first.
func TestNotificationPayload(t *testing.T) {
	body := `{"type":"task.updated","task_id":7,"task":{"title":"a b  c"},"at":"2030-01-02T15:04:05Z"}`
	uid, seq, at, got, err := parseNotification("42 9 1700000000123456 " + body)
	if err != nil || uid != 42 || seq != 9 || !at.Equal(time.UnixMicro(1700000000123456)) || got != body {
		t.Fatalf("parse: %d %d %v %q %v", uid, seq, at, got, err)
	}
	var ev Event
	if err := json.Unmarshal(withSeq(seq, got), &ev); err != nil || ev.Seq != 9 || ev.TaskID != 7 || ev.Task.Title != "a b  c" {
		t.Fatalf("message %s: %+v %v", withSeq(seq, got), ev, err)
	}
	if _, _, _, got, err := parseNotification("42 10 1700000000123456"); err != nil || got != "" {
		t.Errorf("an event too large for NOTIFY: body %q, err %v; want none, no error", got, err)
	}
	for _, bad := range []string{"", "42 9", "x 9 1", "42 9 1 not-json"} {
		if _, _, _, _, err := parseNotification(bad); err == nil {
			t.Errorf("payload %q: read without an error", bad)
		}
	}
}
