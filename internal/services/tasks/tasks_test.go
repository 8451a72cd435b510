package tasks_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

func TestTaskCRUD(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("crud@example.com")

	due := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	created := c.createTask(map[string]any{"title": "  write the report  ", "description": "C", "priority": 2, "due_at": due})
	if created.ID == 0 || created.Title != "write the report" || created.Status != tasks.StatusTodo || created.Priority != 2 ||
		created.DueAt == nil || !created.DueAt.Equal(due) || created.CreatedAt.IsZero() {
		t.Fatalf("created %+v", created)
	}
	path := fmt.Sprintf("/v1/tasks/%d", created.ID)

	var got tasks.Task
	a := c.do("GET", path, nil)
	if a.code != 200 {
		t.Fatalf("get = %s", a)
	}
	a.decode(t, &got)
	if got.ID != created.ID || got.Title != created.Title || got.Notes == nil || *got.Notes != "" || created.Notes != nil {
		t.Fatalf("get = %+v, want %+v with empty notes (the create's answer without)", got, created)
	}

	a = c.do("PATCH", path, map[string]any{"status": "done", "due_at": nil})
	if a.code != 200 {
		t.Fatalf("patch = %s", a)
	}
	var upd tasks.Task
	a.decode(t, &upd)
	if upd.Status != "done" || upd.DueAt != nil || upd.Title != created.Title || upd.Priority != 2 || upd.UpdatedAt.Before(created.UpdatedAt) {
		t.Fatalf("patched %+v", upd)
	}
	// A field left out keeps its value.
	a = c.do("PATCH", path, map[string]any{"title": "renamed"})
	a.decode(t, &upd)
	if a.code != 200 || upd.Title != "renamed" || upd.Status != "done" || upd.Description != "C" {
		t.Fatalf("second patch = %s", a)
	}

	// Notes live in the task's details row: the GET reads them with the
	// task (its LEFT JOIN), a patch of them alone changes that row.
	if a := c.do("PATCH", path, map[string]any{"notes": "see page 3"}); a.code != 200 {
		t.Fatalf("patch notes = %s", a)
	}
	got = tasks.Task{}
	if a := c.do("GET", path, nil); a.code != 200 {
		t.Fatalf("get = %s", a)
	} else if a.decode(t, &got); got.Notes == nil || *got.Notes != "see page 3" || got.Title != "renamed" {
		t.Fatalf("get after patching notes = %+v", got)
	}
	noted := c.createTask(map[string]any{"title": "noted", "notes": "from the start"})
	if a := c.do("GET", fmt.Sprintf("/v1/tasks/%d", noted.ID), nil); a.code != 200 || !strings.Contains(string(a.body), `"notes":"from the start"`) {
		t.Fatalf("get of a task made with notes = %s", a)
	}
	if a := c.do("GET", "/v1/tasks", nil); a.code != 200 || strings.Contains(string(a.body), `"notes"`) {
		t.Fatalf("list = %s, want tasks without their notes", a)
	}

	if a := c.do("DELETE", path, nil); a.code != http.StatusNoContent || len(a.body) != 0 {
		t.Fatalf("delete = %s", a)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if a := c.do(m, path, nil); a.code != 404 || a.err.Error != "not_found" {
			t.Fatalf("%s after delete = %s, want 404", m, a)
		}
	}
	if a := c.do("PATCH", path, map[string]any{"title": "x"}); a.code != 404 {
		t.Fatalf("patch after delete = %s, want 404", a)
	}
	if a := c.do("GET", "/v1/tasks/abc", nil); a.code != 400 || a.err.Field != "id" {
		t.Fatalf("get /v1/tasks/abc = %s, want 400 on id", a)
	}
	if a := e.anon().do("GET", path, nil); a.code != 401 {
		t.Fatalf("get without a token = %s, want 401", a)
	}
	if a := c.do("GET", "/v1/nothing", nil); a.code != 404 || a.err.Reason == "" {
		t.Fatalf("unknown route = %s, want a JSON 404", a)
	}
}

// Another user's task answers 404 exactly like a task that does not
// exist: not 403, which would tell that it exists.
func TestOtherUsersTaskIsInvisible(t *testing.T) {
	e := newEnv(t, nil)
	alice, bob := e.signup("alice@example.com"), e.signup("bob@example.com")
	task := alice.createTask(map[string]any{"title": "alice's secret"})
	path := fmt.Sprintf("/v1/tasks/%d", task.ID)
	missing := fmt.Sprintf("/v1/tasks/%d", task.ID+1000)

	for _, tc := range []struct {
		method string
		body   any
	}{{"GET", nil}, {"PATCH", map[string]any{"title": "mine now"}}, {"DELETE", nil}} {
		a := bob.do(tc.method, path, tc.body)
		m := bob.do(tc.method, missing, tc.body)
		if a.code != 404 {
			t.Fatalf("bob %s alice's task = %s, want 404", tc.method, a)
		}
		// Same answer as for a task that does not exist (trace ids aside).
		a.err.TraceID, m.err.TraceID = "", ""
		if a.err != m.err {
			t.Fatalf("bob %s alice's task = %+v, but a missing task = %+v: the difference leaks existence", tc.method, a.err, m.err)
		}
	}
	var list struct{ Tasks []tasks.Task }
	bob.do("GET", "/v1/tasks", nil).decode(t, &list)
	if len(list.Tasks) != 0 {
		t.Fatalf("bob lists %d tasks, want none of alice's", len(list.Tasks))
	}
	var still tasks.Task
	a := alice.do("GET", path, nil)
	a.decode(t, &still)
	if a.code != 200 || still.Title != "alice's secret" {
		t.Fatalf("alice's task after bob's attempts = %s", a)
	}
}

// Invalid input gets a 4xx with a reason, and writes nothing.
func TestInvalidInputWritesNothing(t *testing.T) {
	e := newEnv(t, func(c *tasks.Config) { c.MaxBodyBytes = 8 << 10 })
	c := e.signup("picky@example.com")
	orig := c.createTask(map[string]any{"title": "original", "priority": 1})
	path := fmt.Sprintf("/v1/tasks/%d", orig.ID)

	for _, tc := range []struct {
		name  string
		body  any
		code  int
		field string
	}{
		{"no title", map[string]any{"description": "x"}, 422, "title"},
		{"blank title", map[string]any{"title": "   "}, 422, "title"},
		{"title too long", map[string]any{"title": strings.Repeat("é", tasks.MaxTitle+1)}, 422, "title"},
		{"description too long", map[string]any{"title": "t", "description": strings.Repeat("d", tasks.MaxDescription+1)}, 422, "description"},
		{"notes too long", map[string]any{"title": "t", "notes": strings.Repeat("n", tasks.MaxNotes+1)}, 422, "notes"},
		{"bad status", map[string]any{"title": "t", "status": "blocked"}, 422, "status"},
		{"priority too high", map[string]any{"title": "t", "priority": 4}, 422, "priority"},
		{"negative priority", map[string]any{"title": "t", "priority": -1}, 422, "priority"},
		{"fractional priority", `{"title": "t", "priority": 1.5}`, 400, "priority"},
		{"bad due_at", map[string]any{"title": "t", "due_at": "tomorrow"}, 422, "due_at"},
		{"unknown field", map[string]any{"title": "t", "owner": 1}, 400, "owner"},
		{"user_id smuggled", map[string]any{"title": "t", "user_id": 1}, 400, "user_id"},
		{"malformed", `{"title": "t"`, 400, ""},
		{"trailing data", `{"title": "t"}{"title": "u"}`, 400, ""},
		{"not an object", `"t"`, 400, ""},
		{"empty", ``, 400, ""},
		{"too large", map[string]any{"title": "t", "description": strings.Repeat("x", 9<<10)}, 413, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count("tasks")
			a := c.do("POST", "/v1/tasks", tc.body)
			if a.code != tc.code || a.err.Field != tc.field || a.err.Reason == "" || a.err.Error == "" {
				t.Fatalf("create = %s, want %d on field %q with a reason", a, tc.code, tc.field)
			}
			if tc.name == "title too long" || tc.name == "bad status" || tc.name == "bad due_at" || tc.name == "unknown field" || tc.name == "too large" {
				// The same body is as wrong for an update.
				if u := c.do("PATCH", path, tc.body); u.code != tc.code {
					t.Fatalf("patch = %s, want %d", u, tc.code)
				}
			}
			if n := e.count("tasks"); n != before {
				t.Fatalf("a refused request wrote tasks: %d -> %d", before, n)
			}
		})
	}
	if a := c.do("PATCH", path, map[string]any{}); a.code != 422 || a.err.Reason == "" {
		t.Fatalf("empty patch = %s, want 422", a)
	}
	var now tasks.Task
	c.do("GET", path, nil).decode(t, &now)
	if now.Title != "original" || now.Priority != 1 || !now.UpdatedAt.Equal(orig.UpdatedAt) {
		t.Fatalf("refused patches changed the task: %+v, was %+v", now, orig)
	}
	if a := c.do("POST", "/v1/tasks", `{"title":"t"}`, "Content-Type", "application/x-www-form-urlencoded"); a.code != 415 {
		t.Fatalf("form content type = %s, want 415", a)
	}
	if e.count("tasks") != 1 {
		t.Fatalf("tasks = %d, want only the original", e.count("tasks"))
	}
}

func TestListFiltersSortPagination(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("lister@example.com")
	other := e.signup("other@example.com")
	other.createTask(map[string]any{"title": "not mine"})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{"todo", "doing", "done"}
	for i := range 25 {
		body := map[string]any{"title": fmt.Sprintf("task %02d", i), "status": statuses[i%3], "priority": i % 4}
		if i%5 != 0 {
			body["due_at"] = base.Add(time.Duration(25-i) * time.Hour)
		}
		c.createTask(body)
	}
	type page struct {
		Tasks      []tasks.Task
		Limit      int
		Offset     int
		NextOffset *int `json:"next_offset"`
	}
	list := func(q string) page {
		t.Helper()
		a := c.do("GET", "/v1/tasks"+q, nil)
		if a.code != 200 {
			t.Fatalf("list %s = %s", q, a)
		}
		var p page
		a.decode(t, &p)
		return p
	}
	titles := func(p page) string {
		var b bytes.Buffer
		for _, t := range p.Tasks {
			b.WriteString(strings.TrimPrefix(t.Title, "task ") + " ")
		}
		return strings.TrimSpace(b.String())
	}

	p := list("")
	if len(p.Tasks) != tasks.DefaultLimit || p.Tasks[0].Title != "task 24" || p.NextOffset == nil || *p.NextOffset != 20 {
		t.Fatalf("default list: %d tasks, first %q, next %v; want newest first, 20, next 20", len(p.Tasks), p.Tasks[0].Title, p.NextOffset)
	}
	if p2 := list("?offset=20"); len(p2.Tasks) != 5 || p2.NextOffset != nil || p2.Tasks[4].Title != "task 00" {
		t.Fatalf("second page = %s, next %v", titles(p2), p2.NextOffset)
	}
	if got := titles(list("?status=done&sort=created_at")); got != "02 05 08 11 14 17 20 23" {
		t.Fatalf("done, oldest first = %s", got)
	}
	if got := titles(list("?priority=3&sort=-priority")); got != "23 19 15 11 07 03" {
		t.Fatalf("priority 3 = %s", got)
	}
	if got := titles(list("?sort=due_at&limit=3")); got != "24 23 22" {
		t.Fatalf("due soonest first = %s", got)
	}
	if got := titles(list("?sort=-due_at&limit=30")); !strings.HasSuffix(got, "20 15 10 05 00") || !strings.HasPrefix(got, "01 02") {
		t.Fatalf("due latest first, no due date last = %s", got)
	}
	if got := titles(list("?due_before=2030-01-01T03:00:00Z&due_after=2030-01-01T01:00:00Z")); got != "24 23" {
		t.Fatalf("due window = %s", got)
	}
	if got := titles(list("?sort=-priority&limit=2&offset=1")); got != "19 15" {
		t.Fatalf("priority desc page = %s", got)
	}
	for _, tc := range []struct {
		q     string
		code  int
		field string
	}{
		{"?limit=0", 422, "limit"},
		{"?limit=101", 422, "limit"},
		{"?offset=-1", 422, "offset"},
		{"?status=blocked", 422, "status"},
		{"?priority=x", 422, "priority"},
		{"?sort=title", 422, "sort"},
		{"?due_before=soon", 422, "due_before"},
		{"?owner=1", 400, "owner"},
		{"?limit=1&limit=2", 400, "limit"},
	} {
		if a := c.do("GET", "/v1/tasks"+tc.q, nil); a.code != tc.code || a.err.Field != tc.field || a.err.Reason == "" {
			t.Errorf("list %s = %s, want %d on %q", tc.q, a, tc.code, tc.field)
		}
	}
}

func TestDevices(t *testing.T) {
	e := newEnv(t, nil)
	c, other := e.signup("dev@example.com"), e.signup("other@example.com")
	a := c.do("POST", "/v1/devices", map[string]string{"platform": "ios", "push_token": "apns-1"})
	if a.code != 201 {
		t.Fatalf("create device = %s", a)
	}
	var d tasks.Device
	a.decode(t, &d)
	c.do("POST", "/v1/devices", map[string]string{"platform": "web", "push_token": "web-1"})
	var list struct{ Devices []tasks.Device }
	c.do("GET", "/v1/devices", nil).decode(t, &list)
	if len(list.Devices) != 2 || list.Devices[0].PushToken != "apns-1" {
		t.Fatalf("devices = %+v", list.Devices)
	}
	var none struct{ Devices []tasks.Device }
	if a := other.do("GET", "/v1/devices", nil); a.code != 200 || !strings.Contains(string(a.body), `"devices":[]`) {
		t.Fatalf("other's devices = %s, want an empty list", a)
	} else {
		a.decode(t, &none)
	}
	path := fmt.Sprintf("/v1/devices/%d", d.ID)
	if a := other.do("DELETE", path, nil); a.code != 404 {
		t.Fatalf("other deletes my device = %s, want 404", a)
	}
	before := e.count("devices")
	for _, body := range []any{
		map[string]string{"platform": "nokia", "push_token": "x"},
		map[string]string{"platform": "ios", "push_token": ""},
		map[string]string{"platform": "ios", "push_token": strings.Repeat("t", tasks.MaxPushToken+1)},
		map[string]any{"platform": "ios", "push_token": "x", "user_id": other.id},
	} {
		if a := c.do("POST", "/v1/devices", body); a.code/100 != 4 || a.err.Reason == "" {
			t.Errorf("create device %v = %s, want a 4xx with a reason", body, a)
		}
	}
	if e.count("devices") != before {
		t.Fatal("refused devices were written")
	}
	if a := c.do("DELETE", path, nil); a.code != 204 {
		t.Fatalf("delete device = %s", a)
	}
	if a := c.do("DELETE", path, nil); a.code != 404 {
		t.Fatalf("delete device twice = %s", a)
	}
}
