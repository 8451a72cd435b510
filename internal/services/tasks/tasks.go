package tasks

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Task statuses.
const (
	StatusTodo  = "todo"
	StatusDoing = "doing"
	StatusDone  = "done"
)

// Limits of a task's fields and of a list.
const (
	MaxTitle       = 200  // characters
	MaxDescription = 4000 // characters
	MaxNotes       = 4000 // characters
	MaxPriority    = 3
	DefaultLimit   = 20
	MaxLimit       = 100
	MaxOffset      = 10000
	MinDueYear     = 1970
	MaxDueYear     = 9998
)

// Event types sent to WebSockets and webhooks.
const (
	EventCreated = "task.created"
	EventUpdated = "task.updated"
	EventDeleted = "task.deleted"
)

// Event is a change of one of a user's tasks.
type Event struct {
	// Seq numbers a user's events in commit order, from 1, without gaps
	// (EventsPostgres; 0 and left out under EventsLocal): a device
	// resumes with GET /v1/ws?after_seq= its last one.
	Seq    int64     `json:"seq,omitempty"`
	Type   string    `json:"type"`
	TaskID int64     `json:"task_id"`
	Task   *Task     `json:"task,omitempty"` // nil for deletions
	At     time.Time `json:"at"`
}

// taskBody is a create or update body as sent: only due_at may be null
// (it clears the task's due date); any other field sent as null is
// refused.
type taskBody struct {
	Title       nonNull[string] `json:"title"`
	Description nonNull[string] `json:"description"`
	Status      nonNull[string] `json:"status"`
	Priority    nonNull[int]    `json:"priority"`
	DueAt       optTime         `json:"due_at"`
	Notes       nonNull[string] `json:"notes"`
}

func (b *taskBody) input() taskInput {
	return taskInput{Title: b.Title.v, Description: b.Description.v, Status: b.Status.v, Priority: b.Priority.v, DueAt: b.DueAt, Notes: b.Notes.v}
}

// taskInput is a create or update body's fields; nil fields were not
// sent.
type taskInput struct {
	Title       *string
	Description *string
	Status      *string
	Priority    *int
	DueAt       optTime
	Notes       *string
}

// optTime tells a due_at that was not sent from one sent as null (clear it).
type optTime struct {
	Set  bool
	Time *time.Time
}

func (o *optTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Time = nil
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return invalid("due_at", "must be an RFC 3339 time like 2030-01-02T15:04:05Z, or null")
	}
	// The year as written, in the time's own offset; 9999 would be past
	// it in UTC with a negative offset, which the database stores, but
	// RFC 3339 (4-digit years) cannot write in an answer.
	if t.Year() < MinDueYear || t.Year() > MaxDueYear {
		return invalid("due_at", "must be between the years %d and %d", MinDueYear, MaxDueYear)
	}
	o.Time = &t
	return nil
}

// validate checks in; create requires a title, update at least one field.
func (in *taskInput) validate(create bool) error {
	for _, f := range [...]struct {
		name string
		v    *string
	}{{"title", in.Title}, {"description", in.Description}, {"notes", in.Notes}} {
		if f.v != nil {
			if err := noNUL(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	if in.Title != nil {
		t := strings.TrimSpace(*in.Title)
		if n := utf8.RuneCountInString(t); n == 0 || n > MaxTitle {
			return invalid("title", "must be 1 to %d characters", MaxTitle)
		}
		in.Title = &t
	} else if create {
		return invalid("title", "required: 1 to %d characters", MaxTitle)
	}
	if in.Description != nil && utf8.RuneCountInString(*in.Description) > MaxDescription {
		return invalid("description", "at most %d characters", MaxDescription)
	}
	if in.Notes != nil && utf8.RuneCountInString(*in.Notes) > MaxNotes {
		return invalid("notes", "at most %d characters", MaxNotes)
	}
	if in.Status != nil && !validStatus(*in.Status) {
		return invalid("status", "must be todo, doing or done")
	}
	if in.Priority != nil && (*in.Priority < 0 || *in.Priority > MaxPriority) {
		return invalid("priority", "must be 0 to %d", MaxPriority)
	}
	if !create && in.Title == nil && in.Description == nil && in.Status == nil && in.Priority == nil && !in.DueAt.Set && in.Notes == nil {
		return invalid("", "nothing to update: send at least one of title, description, status, priority, due_at, notes")
	}
	return nil
}

func validStatus(s string) bool { return s == StatusTodo || s == StatusDoing || s == StatusDone }

func (s *Service) createTask(w http.ResponseWriter, r *http.Request, uid int64) error {
	var body taskBody
	if err := s.decode(w, r, &body); err != nil {
		return err
	}
	in := body.input()
	if err := in.validate(true); err != nil {
		return err
	}
	ev, err := s.store.createTask(r.Context(), uid, &in)
	if err != nil {
		return err
	}
	s.changed(r, uid, ev)
	return writeJSON(w, http.StatusCreated, ev.Task)
}

func (s *Service) getTask(w http.ResponseWriter, r *http.Request, uid int64) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	t, err := s.store.task(r.Context(), uid, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
}

func (s *Service) updateTask(w http.ResponseWriter, r *http.Request, uid int64) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body taskBody
	if err := s.decode(w, r, &body); err != nil {
		return err
	}
	in := body.input()
	if err := in.validate(false); err != nil {
		return err
	}
	ev, err := s.store.updateTask(r.Context(), uid, id, &in)
	if err != nil {
		return err
	}
	s.changed(r, uid, ev)
	return writeJSON(w, http.StatusOK, ev.Task)
}

func (s *Service) deleteTask(w http.ResponseWriter, r *http.Request, uid int64) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ev, err := s.store.deleteTask(r.Context(), uid, id)
	if err != nil {
		return err
	}
	s.changed(r, uid, ev)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// taskList is the answer of GET /v1/tasks.
type taskList struct {
	Tasks      []Task `json:"tasks"`
	Limit      int    `json:"limit"`
	Offset     int    `json:"offset"`
	NextOffset *int   `json:"next_offset"` // null on the last page
}

func (s *Service) listTasks(w http.ResponseWriter, r *http.Request, uid int64) error {
	f, err := parseListQuery(r)
	if err != nil {
		return err
	}
	ts, err := s.store.listTasks(r.Context(), uid, f)
	if err != nil {
		return err
	}
	out := taskList{Tasks: ts, Limit: f.limit, Offset: f.offset}
	if len(ts) == f.limit && f.offset+f.limit <= MaxOffset {
		next := f.offset + f.limit
		out.NextOffset = &next
	}
	return writeJSON(w, http.StatusOK, out)
}

func parseListQuery(r *http.Request) (listFilter, error) {
	f := listFilter{priority: -1, sort: "-created_at", limit: DefaultLimit}
	q := r.URL.Query()
	for k, vs := range q {
		if len(vs) != 1 {
			return f, malformed(k, "give it once")
		}
		v := vs[0]
		switch k {
		case "status":
			if !validStatus(v) {
				return f, invalid(k, "must be todo, doing or done")
			}
			f.status = v
		case "priority":
			p, err := strconv.Atoi(v)
			if err != nil || p < 0 || p > MaxPriority {
				return f, invalid(k, "must be 0 to %d", MaxPriority)
			}
			f.priority = p
		case "due_before", "due_after":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, invalid(k, "must be an RFC 3339 time like 2030-01-02T15:04:05Z")
			}
			if k == "due_before" {
				f.dueBefore = &t
			} else {
				f.dueAfter = &t
			}
		case "sort":
			if _, ok := listSorts[v]; !ok {
				return f, invalid(k, "must be created_at, updated_at, due_at or priority, with - for descending")
			}
			f.sort = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxLimit {
				return f, invalid(k, "must be 1 to %d", MaxLimit)
			}
			f.limit = n
		case "offset":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxOffset {
				return f, invalid(k, "must be 0 to %d", MaxOffset)
			}
			f.offset = n
		default:
			return f, &InputError{Status: http.StatusBadRequest, Kind: "unknown_parameter", Field: k,
				Reason: "unknown query parameter: use status, priority, due_before, due_after, sort, limit, offset"}
		}
	}
	return f, nil
}

// changed tells the user's WebSockets and devices about a committed change.
func (s *Service) changed(r *http.Request, uid int64, ev Event) {
	afterCommit(r.Context(), func() {
		if s.events == nil { // else every instance's listener delivers it
			s.hub.publish(uid, ev)
		}
		if s.outbox != nil {
			s.outbox.wake() // the change wrote its notification to the outbox
			return
		}
		s.notifier.enqueue(job{uid: uid, ev: ev, at: time.Now()})
	})
}
