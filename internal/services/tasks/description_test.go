package tasks_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// kin-openapi checks format "email" only when told to (with its pattern:
// one @, no spaces or brackets), as schemathesis does by default.
func init() { openapi3.DefineStringFormat("email", openapi3.FormatOfStringForEmail) }

// TestDescriptionRefusesWhatTheServiceRefuses: every input the service
// refuses, openapi.json calls wrong too, so that a client generated from
// it (or schemathesis, which found these) does not send it in good faith.
// An empty email, a blank title, a due_at in 1969 and a due_after with a
// leap second all conformed to the description and were refused with 422.
func TestDescriptionRefusesWhatTheServiceRefuses(t *testing.T) {
	e := newEnv(t, nil)
	c := newSpecCheck(t, e)
	var s struct{ Token string }
	json.Unmarshal(c.call("", "POST", "/v1/auth/signup", map[string]any{"email": "desc@example.com", "password": "a long password"}, true, 201), &s)
	tok := s.Token
	var task struct{ ID int64 }
	json.Unmarshal(c.call(tok, "POST", "/v1/tasks", map[string]any{"title": "t", "due_at": "9998-12-31T23:59:59-23:59"}, true, 201), &task)
	path := fmt.Sprintf("/v1/tasks/%d", task.ID)
	for _, tc := range []struct {
		method, path string
		body         map[string]any
	}{
		{"POST", "/v1/auth/signup", map[string]any{"email": "", "password": "a long password"}},
		{"POST", "/v1/auth/signup", map[string]any{"email": "not an address", "password": "a long password"}},
		{"POST", "/v1/auth/login", map[string]any{"email": "", "password": "a long password"}},
		{"POST", "/v1/auth/signup", map[string]any{"email": "nul@example.com", "password": "a long password", "name": "a\x00"}},
		{"POST", "/v1/tasks", map[string]any{"title": "  \t "}},
		{"POST", "/v1/tasks", map[string]any{"title": "t", "due_at": "1969-12-31T23:59:59Z"}},
		{"POST", "/v1/tasks", map[string]any{"title": "t", "due_at": "9999-12-31T23:59:59-01:00"}},
		{"POST", "/v1/tasks", map[string]any{"title": "t", "notes": "\x00"}},
		{"PATCH", path, map[string]any{"title": "\u3000"}},
		{"POST", "/v1/devices", map[string]any{"platform": "web", "push_token": " "}},
		{"GET", "/v1/tasks?due_before=2030-01-01t00:00:00z", nil},
		{"GET", "/v1/tasks?due_after=2030-06-30T23:59:60Z", nil},
	} {
		t.Run(tc.method+" "+tc.path+" "+strings.ReplaceAll(fmt.Sprint(tc.body), "/", "_"), func(t *testing.T) {
			token := tok
			if strings.HasPrefix(tc.path, "/v1/auth/") {
				token = ""
			}
			c.t = t
			var body any
			if tc.body != nil {
				body = tc.body
			}
			c.call(token, tc.method, tc.path, body, false, 422)
		})
	}
}
