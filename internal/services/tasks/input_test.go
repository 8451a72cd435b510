package tasks_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// Inputs that schemathesis, generating requests from openapi.json, found
// the service mishandling: each is refused with the documented status
// and writes nothing.

// TestNullFieldsRefused: a field sent as null, where the description has
// a string or an integer, is refused with 422 naming it, on create and on
// update; only due_at may be null (it clears the due date). It was taken
// for "not sent": {"status": null} created a todo task with 201.
func TestNullFieldsRefused(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("nulls@example.com")
	orig := c.createTask(map[string]any{"title": "original", "description": "d", "priority": 2, "status": "doing", "notes": "n"})
	path := fmt.Sprintf("/v1/tasks/%d", orig.ID)
	for _, field := range []string{"title", "description", "status", "priority", "notes"} {
		t.Run(field, func(t *testing.T) {
			create := map[string]any{"title": "t", field: nil}
			if a := c.do("POST", "/v1/tasks", create); a.code != 422 || a.err.Field != field || !strings.Contains(a.err.Reason, "not null") {
				t.Errorf("create with %s null = %s, want 422 on %s", field, a, field)
			}
			if a := c.do("PATCH", path, map[string]any{"title": "renamed", field: nil}); a.code != 422 || a.err.Field != field {
				t.Errorf("update with %s null = %s, want 422 on %s", field, a, field)
			}
		})
	}
	if n := e.count("tasks"); n != 1 {
		t.Fatalf("tasks = %d, want the original only", n)
	}
	var now tasks.Task
	c.do("GET", path, nil).decode(t, &now)
	if now.Title != "original" || !now.UpdatedAt.Equal(orig.UpdatedAt) {
		t.Fatalf("refused updates changed the task: %+v", now)
	}
	// due_at null is the one null the description allows.
	if a := c.do("PATCH", path, map[string]any{"due_at": nil}); a.code != 200 {
		t.Fatalf("update with due_at null = %s, want 200", a)
	}
	// A wrong type is still the 400 it was.
	if a := c.do("POST", "/v1/tasks", map[string]any{"title": "t", "priority": "high"}); a.code != 400 || a.err.Field != "priority" {
		t.Fatalf("priority as a string = %s, want 400 on priority", a)
	}
	// The account's name may be left out, never null.
	if a := e.anon().do("POST", "/v1/auth/signup", map[string]any{"email": "nullname@example.com", "password": "a long password", "name": nil}); a.code != 422 || a.err.Field != "name" {
		t.Fatalf("sign-up with name null = %s, want 422 on name", a)
	}
}

// TestNULRefused: text with the NUL character (U+0000), which Postgres
// cannot store, is refused with 422 naming the field; it failed the write
// with a 500 (SQLSTATE 22021).
func TestNULRefused(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("nul@example.com")
	task := c.createTask(map[string]any{"title": "t"})
	path := fmt.Sprintf("/v1/tasks/%d", task.ID)
	for _, tc := range []struct {
		method, path string
		body         map[string]any
		field        string
	}{
		{"POST", "/v1/tasks", map[string]any{"title": "a\x00b"}, "title"},
		{"POST", "/v1/tasks", map[string]any{"title": "t", "description": "\x00"}, "description"},
		{"POST", "/v1/tasks", map[string]any{"title": "t", "notes": "n\x00"}, "notes"},
		{"PATCH", path, map[string]any{"title": "a\x00b"}, "title"},
		{"PATCH", path, map[string]any{"notes": "\x00"}, "notes"},
		{"POST", "/v1/devices", map[string]any{"platform": "ios", "push_token": "tok\x00en"}, "push_token"},
		{"POST", "/v1/auth/signup", map[string]any{"email": "n2@example.com", "password": "a long password", "name": "a\x00b"}, "name"},
		{"POST", "/v1/auth/signup", map[string]any{"email": "n\x00@example.com", "password": "a long password"}, "email"},
		{"POST", "/v1/auth/login", map[string]any{"email": "n\x00@example.com", "password": "a long password"}, "email"},
	} {
		if a := c.do(tc.method, tc.path, tc.body); a.code != 422 || a.err.Field != tc.field {
			t.Errorf("%s %s with NUL in %s = %s, want 422 on %s", tc.method, tc.path, tc.field, a, tc.field)
		}
	}
	if e.count("tasks") != 1 || e.count("devices") != 0 || e.count("users") != 1 {
		t.Fatalf("refused requests wrote: tasks %d, devices %d, users %d", e.count("tasks"), e.count("devices"), e.count("users"))
	}
}

// TestDueAtYears: due_at's year, as written, is 1970 to 9998, as the
// description says. 9999-12-31T23:59:59-01:00 was stored as year 10000 in
// UTC, which no RFC 3339 answer can write: a 500, then on every read of
// the task.
func TestDueAtYears(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("years@example.com")
	for _, tc := range []struct {
		due  string
		code int
	}{
		{"1969-12-31T23:59:59Z", 422},
		{"9999-12-31T23:59:59-01:00", 422},
		{"9999-01-01T00:00:00Z", 422},
		{"1970-01-01T00:00:00Z", 201},
		{"9998-12-31T23:59:59-23:59", 201},
	} {
		a := c.do("POST", "/v1/tasks", map[string]any{"title": "t", "due_at": tc.due})
		if a.code != tc.code || (tc.code == 422 && a.err.Field != "due_at") {
			t.Errorf("due_at %s = %s, want %d", tc.due, a, tc.code)
		}
	}
	if a := c.do("GET", "/v1/tasks", nil); a.code != 200 {
		t.Fatalf("list = %s", a)
	}
}

// TestPasswordCountsCharacters: a password is 8 to 72 characters, as the
// description says (JSON Schema counts characters), though bcrypt takes 72
// bytes: a longer one in UTF-8 is hashed through SHA-256, so all of it
// counts. 72 "é" (144 bytes) was refused with 422, and 3 "€" (9 bytes)
// accepted.
func TestPasswordCountsCharacters(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("é", 72)
	a := e.anon().do("POST", "/v1/auth/signup", map[string]any{"email": "long@example.com", "password": long})
	if a.code != http.StatusCreated {
		t.Fatalf("sign-up with 72 characters, 144 bytes = %s, want 201", a)
	}
	login := func(pw string) int {
		return e.anon().do("POST", "/v1/auth/login", map[string]any{"email": "long@example.com", "password": pw}).code
	}
	if code := login(long); code != 200 {
		t.Fatalf("login with the long password = %d, want 200", code)
	}
	// Past bcrypt's 72 bytes, the rest of the password still counts.
	if code := login(strings.Repeat("é", 71) + "e"); code != 401 {
		t.Fatalf("login with the long password's last character changed = %d, want 401", code)
	}
	for _, pw := range []string{strings.Repeat("€", 3), strings.Repeat("é", 73)} {
		if a := e.anon().do("POST", "/v1/auth/signup", map[string]any{"email": "bad@example.com", "password": pw}); a.code != 422 || a.err.Field != "password" {
			t.Errorf("sign-up with a password of %d characters = %s, want 422", len([]rune(pw)), a)
		}
	}
	// A password of at most 72 bytes is hashed as it always was.
	e.signup("short@example.com")
	if a := e.anon().do("POST", "/v1/auth/login", map[string]any{"email": "short@example.com", "password": "password-of-short@example.com"}); a.code != 200 {
		t.Fatalf("login with an ASCII password = %s", a)
	}
}
