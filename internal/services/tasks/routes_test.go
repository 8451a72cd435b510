package tasks_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestUndeclaredMethods: a method a route's path does not serve answers
// 405 with Allow listing those it does (RFC 9110), on every route, and an
// unknown path a JSON 404. The router's catch-all took them all: TRACE
// /v1/tasks answered 404 no_route.
func TestUndeclaredMethods(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("methods@example.com")
	allow := map[string][]string{} // path -> methods, from the route table
	for _, p := range e.svc.Patterns() {
		m, path, _ := strings.Cut(p, " ")
		path = strings.ReplaceAll(path, "{id}", "1")
		allow[path] = append(allow[path], m)
		if m == "GET" {
			allow[path] = append(allow[path], "HEAD")
		}
	}
	for path, methods := range allow {
		slices.Sort(methods)
		want := strings.Join(methods, ", ")
		for _, m := range []string{"TRACE", "PUT", "OPTIONS", "PATCH", "DELETE", "POST"} {
			if slices.Contains(methods, m) {
				continue
			}
			a := c.do(m, path, nil)
			if a.code != http.StatusMethodNotAllowed || a.hdr.Get("Allow") != want || a.err.Error != "method_not_allowed" {
				t.Errorf("%s %s = %s, Allow %q; want 405 method_not_allowed, Allow %q", m, path, a, a.hdr.Get("Allow"), want)
			}
		}
	}
	for _, path := range []string{"/v1/nothing", "/nothing", "/v1/tasks/1/more"} {
		if a := c.do("GET", path, nil); a.code != 404 || a.err.Error != "no_route" || a.hdr.Get("Allow") != "" {
			t.Errorf("GET %s = %s, want 404 no_route", path, a)
		}
	}
}

// TestWebSocketWithoutUpgrade: a plain GET /v1/ws (curl, a browser's
// address bar) with a good token answers the documented 426 as a JSON
// Error, with Upgrade: websocket; the WebSocket library answered it 426
// in plain text, a status and a content type the description did not
// have. Without a token it is still 401.
func TestWebSocketWithoutUpgrade(t *testing.T) {
	e := newEnv(t, nil)
	c := e.signup("plain@example.com")
	a := c.do("GET", "/v1/ws", nil)
	if a.code != http.StatusUpgradeRequired || a.err.Error != "upgrade_required" || a.hdr.Get("Content-Type") != "application/json" ||
		!strings.EqualFold(a.hdr.Get("Upgrade"), "websocket") {
		t.Fatalf("plain GET /v1/ws = %s (%s, Upgrade %q); want 426 upgrade_required as JSON, Upgrade: websocket", a, a.hdr.Get("Content-Type"), a.hdr.Get("Upgrade"))
	}
	if a := e.anon().do("GET", "/v1/ws", nil); a.code != http.StatusUnauthorized {
		t.Fatalf("plain GET /v1/ws without a token = %s, want 401", a)
	}
}
