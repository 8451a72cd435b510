package tasks

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Tasks and task lists are most of the API's answers (a list of 20 tasks
// is about 4 KB), and encoding/json's reflection was a tenth of the
// service's CPU under load. They are encoded by hand here, byte for byte
// as encoding/json would (json_test.go compares the two); any other
// answer goes through encoding/json.

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
	b = appendString(b, t.Title)
	b = append(b, `,"description":`...)
	b = appendString(b, t.Description)
	b = append(b, `,"status":`...)
	b = appendString(b, t.Status)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = append(b, `,"due_at":`...)
	if t.DueAt == nil {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, *t.DueAt)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, t.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, t.UpdatedAt)
	if t.Notes != nil {
		b = append(b, `,"notes":`...)
		b = appendString(b, *t.Notes)
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

// appendTime writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds); the API's times are within years 0-9999, where the two agree.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString writes s as a JSON string the way encoding/json does:
// quotes, backslashes and control characters escaped, <, > and & as
// \u003c etc. (HTML-safe), invalid UTF-8 as \ufffd, and U+2028 and U+2029
// escaped (JavaScript line terminators).
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
			case '"', '\\':
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
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
