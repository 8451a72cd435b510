package tasks

import (
	"encoding/json"
	"testing"
	"time"
)

// The hand-written encoders write what encoding/json writes (strings
// alone, escapes and bad UTF-8 included: package jsonappend's tests).

func TestAppendAnswerMatchesEncodingJSON(t *testing.T) {
	due := time.Date(2031, 1, 2, 3, 4, 5, 123456000, time.UTC)
	berlin := time.FixedZone("CET", 3600)
	notes := `quote " and backslash \`
	tasks := []Task{
		{ID: 1, Title: "t", Status: StatusTodo, CreatedAt: due, UpdatedAt: due},
		{ID: 2, Title: "with notes", Status: StatusDoing, CreatedAt: due, UpdatedAt: due, Notes: &notes},
		{ID: 1 << 62, Title: "<script>&amp;</script>", Description: "bad \xff\xfe utf-8 \xc3", Status: StatusDone, Priority: 3,
			DueAt: &due, CreatedAt: time.Date(1970, 1, 1, 0, 0, 0, 0, berlin), UpdatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
	}
	next := 40
	for _, v := range []any{
		tasks[0], tasks[1],
		taskList{Tasks: tasks, Limit: 20, Offset: 20, NextOffset: &next},
		taskList{Tasks: []Task{}, Limit: 20},
		User{ID: 7, Email: "a@b.c"}, // not hand-written: encoding/json
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendAnswer(nil, v)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendAnswer(%T) = %s, %v\nwant %s", v, got, err, want)
		}
	}
}

func BenchmarkEncodeTaskList(b *testing.B) {
	due := time.Now()
	l := taskList{Limit: 20}
	for i := range 20 {
		l.Tasks = append(l.Tasks, Task{ID: int64(i), Title: "load task 12-345", Description: "made by the tasks scenario of hlab load",
			Status: StatusDoing, Priority: 3, DueAt: &due, CreatedAt: due, UpdatedAt: due})
	}
	b.Run("hand-written", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = appendAnswer(buf[:0], l)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			out, _ := json.Marshal(l)
			b.SetBytes(int64(len(out)))
		}
	})
}
