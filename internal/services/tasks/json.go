package tasks

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/highload-lab/hlab/internal/jsonappend"
)

// Tasks and task lists are most of the API's answers (a list of 20 tasks
// is about 4 KB), and encoding/json's reflection was a tenth of the
// service's CPU under load. They are encoded by hand here, byte for byte
// as encoding/json would (jsonappend; json_internal_test.go compares the
// two); the API's times are within years 0-9999, where jsonappend.Time
// and encoding/json agree. Any other answer goes through encoding/json.

// encodeBuffers recycles answer buffers; big ones are dropped.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

const maxPooledBuffer = 64 << 10

// appendAnswer appends v as JSON to b.
func appendAnswer(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case Task:
		return appendTask(b, &v), nil
	case taskList:
		return v.appendJSON(b), nil
	}
	out, err := json.Marshal(v)
	return append(b, out...), err
}

func appendTask(b []byte, t *Task) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, t.ID, 10)
	b = append(b, `,"title":`...)
	b = jsonappend.String(b, t.Title)
	b = append(b, `,"description":`...)
	b = jsonappend.String(b, t.Description)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, t.Status)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = append(b, `,"due_at":`...)
	if t.DueAt == nil {
		b = append(b, "null"...)
	} else {
		b = jsonappend.Time(b, *t.DueAt)
	}
	b = append(b, `,"created_at":`...)
	b = jsonappend.Time(b, t.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = jsonappend.Time(b, t.UpdatedAt)
	if t.Notes != nil {
		b = append(b, `,"notes":`...)
		b = jsonappend.String(b, *t.Notes)
	}
	return append(b, '}')
}

func (l *taskList) appendJSON(b []byte) []byte {
	b = append(b, `{"tasks":[`...)
	for i := range l.Tasks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTask(b, &l.Tasks[i])
	}
	b = append(b, `],"limit":`...)
	b = strconv.AppendInt(b, int64(l.Limit), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(l.Offset), 10)
	b = append(b, `,"next_offset":`...)
	if l.NextOffset == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*l.NextOffset), 10)
	}
	return append(b, '}')
}
