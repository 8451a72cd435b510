package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// loadSpec parses and validates the embedded description, with its
// servers replaced by base (the test's server) so the router matches it.
func loadSpec(t *testing.T, base string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(tasks.OpenAPI())
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 description: %v", err)
	}
	if base != "" {
		doc.Servers = openapi3.Servers{{URL: base}}
	}
	return doc
}

// TestOpenAPIRoutes: the description and the router hold the same
// routes, both ways; the router's come from its one route table.
func TestOpenAPIRoutes(t *testing.T) {
	e := newEnv(t, nil)
	doc := loadSpec(t, "")
	var served, described []string
	for _, p := range e.svc.Patterns() {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			t.Fatalf("route %q has no method: every route names one", p)
		}
		served = append(served, method+" "+path)
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+path)
		}
	}
	slices.Sort(served)
	slices.Sort(described)
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is served but not in openapi.json", r)
		}
	}
	for _, r := range described {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.json describes %s, which the router does not serve", r)
		}
	}
	if len(served) == 0 {
		t.Fatal("no routes")
	}
}

// TestOpenAPIServed: GET /openapi.json answers the embedded description
// as JSON, without a token.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, nil)
	a := e.anon().do("GET", "/openapi.json", nil)
	if a.code != 200 || a.hdr.Get("Content-Type") != "application/json" || !bytes.Equal(a.body, tasks.OpenAPI()) {
		t.Fatalf("GET /openapi.json = %d %s, %d bytes; want 200 application/json with the embedded description", a.code, a.hdr.Get("Content-Type"), len(a.body))
	}
}

// specCheck validates requests and answers against the description.
type specCheck struct {
	t      *testing.T
	e      *env
	router routers.Router
	opts   *openapi3filter.Options
}

func newSpecCheck(t *testing.T, e *env) *specCheck {
	doc := loadSpec(t, e.srv.URL)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &specCheck{t: t, e: e, router: router, opts: &openapi3filter.Options{
		IncludeResponseStatus: true, // a status the description does not list fails
		MultiError:            true,
		// The security requirement holds when the credential is there;
		// whether the token is good is the service's to say (401).
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			switch in.SecuritySchemeName {
			case "bearer":
				if h := in.RequestValidationInput.Request.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
					return nil
				}
			case "queryToken":
				if in.RequestValidationInput.Request.URL.Query().Get("token") != "" {
					return nil
				}
			}
			return fmt.Errorf("no %s credential", in.SecuritySchemeName)
		},
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
	}}
}

// call sends a request, validates it against the description (it must
// conform, or must not when reqValid is false: a deliberately bad
// request), checks the status, and validates the answer.
func (c *specCheck) call(token, method, path string, body any, reqValid bool, want int) []byte {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, c.e.srv.URL+path, rd)
		if err != nil {
			c.t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req
	}
	vreq := newReq()
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		c.t.Fatalf("%s %s: not in openapi.json: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: c.opts}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case reqValid && err != nil:
		c.t.Fatalf("%s %s: the request does not conform to openapi.json: %v", method, path, err)
	case !reqValid && err == nil:
		c.t.Fatalf("%s %s: a request the service refuses conforms to openapi.json: the description is looser than the service", method, path)
	}

	resp, err := httpClient.Do(newReq())
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, got, want)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: c.opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Fatalf("%s %s: the answer %d %s does not conform to openapi.json: %v", method, path, resp.StatusCode, got, err)
	}
	return got
}

// TestOpenAPIConformance drives the real service through a user's life
// (sign up, log in, devices, tasks from creation to deletion) and some
// errors, validating every request and answer against openapi.json.
func TestOpenAPIConformance(t *testing.T) {
	e := newEnv(t, nil)
	c := newSpecCheck(t, e)
	var s struct{ Token string }
	json.Unmarshal(c.call("", "POST", "/v1/auth/signup", map[string]any{"email": "spec@example.com", "password": "a long password", "name": "Spec"}, true, 201), &s)
	c.call("", "POST", "/v1/auth/signup", map[string]any{"email": "spec@example.com", "password": "another password"}, true, 409)
	json.Unmarshal(c.call("", "POST", "/v1/auth/login", map[string]any{"email": "spec@example.com", "password": "a long password"}, true, 200), &s)
	c.call("", "POST", "/v1/auth/login", map[string]any{"email": "spec@example.com", "password": "wrong password"}, true, 401)
	tok := s.Token
	c.call(tok, "GET", "/v1/me", nil, true, 200)

	var dev tasks.Device
	json.Unmarshal(c.call(tok, "POST", "/v1/devices", map[string]any{"platform": "ios", "push_token": "apns-token"}, true, 201), &dev)
	c.call(tok, "GET", "/v1/devices", nil, true, 200)
	c.call(tok, "POST", "/v1/devices", map[string]any{"platform": "ios", "push_token": "apns-token"}, true, 200) // the same token: the same device
	c.call(tok, "DELETE", fmt.Sprintf("/v1/devices/%d", dev.ID), nil, true, 204)
	c.call(tok, "POST", "/v1/ws/ticket", nil, true, 201)

	var task tasks.Task
	json.Unmarshal(c.call(tok, "POST", "/v1/tasks", map[string]any{"title": "write the spec", "priority": 2, "due_at": "2031-05-06T07:08:09Z"}, true, 201), &task)
	c.call(tok, "POST", "/v1/tasks", map[string]any{"title": "no due date"}, true, 201)
	path := fmt.Sprintf("/v1/tasks/%d", task.ID)
	c.call(tok, "GET", "/v1/tasks", nil, true, 200)
	c.call(tok, "GET", "/v1/tasks?status=todo&sort=-priority&limit=1", nil, true, 200) // a page with a next_offset
	c.call(tok, "GET", path, nil, true, 200)
	c.call(tok, "PATCH", path, map[string]any{"status": "done", "due_at": nil}, true, 200)
	c.call(tok, "DELETE", path, nil, true, 204)

	// Errors the description lists, from requests that conform to it...
	c.call(tok, "GET", path, nil, true, 404)
	c.call(tok, "PATCH", path, map[string]any{"title": "gone"}, true, 404)
	c.call("t1.forged.token", "GET", "/v1/tasks", nil, true, 401)
	c.call("t1.forged.token", "GET", "/v1/ws", nil, true, 401)
	// ... and from requests it already calls wrong (the service refuses
	// them with the status the description gives).
	c.call("", "GET", "/v1/tasks", nil, false, 401)                                         // no token
	c.call(tok, "GET", "/v1/tasks/abc", nil, false, 400)                                    // id not an integer
	c.call(tok, "POST", "/v1/tasks", `{"title": "t"`, false, 400)                           // malformed JSON
	c.call(tok, "POST", "/v1/tasks", map[string]any{"title": "t", "owner": 1}, false, 400)  // unknown field
	c.call(tok, "POST", "/v1/tasks", map[string]any{"description": "no title"}, false, 422) // title required
	c.call(tok, "POST", "/v1/tasks", map[string]any{"title": "t", "priority": 4}, false, 422)
	c.call(tok, "PATCH", fmt.Sprintf("/v1/tasks/%d", task.ID+1), map[string]any{}, false, 422) // nothing to update
	c.call(tok, "GET", "/v1/tasks?limit=101", nil, false, 422)
	c.call("", "POST", "/v1/auth/signup", map[string]any{"email": "x@example.com", "password": "short"}, false, 422)
	c.call("", "GET", "/openapi.json", nil, true, 200)
}

// TestOpenAPICheckerBites: the validation the conformance test relies on
// rejects an answer that breaks the description (a due_at that is not a
// date-time, a task without its id), so a passing run means something.
func TestOpenAPICheckerBites(t *testing.T) {
	doc := loadSpec(t, "http://tasks.test")
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://tasks.test/v1/tasks/1", nil)
	req.Header.Set("Authorization", "Bearer x")
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()}}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	good := `{"id":1,"title":"t","description":"","status":"todo","priority":0,"due_at":null,"created_at":"2030-01-01T00:00:00Z","updated_at":"2030-01-01T00:00:00Z"}`
	for _, tc := range []struct {
		name, body string
		status     int
		ok         bool
	}{
		{"good", good, 200, true},
		{"due_at not a time", strings.Replace(good, `"due_at":null`, `"due_at":"tomorrow"`, 1), 200, false},
		{"no id", strings.Replace(good, `"id":1,`, ``, 1), 200, false},
		{"extra field", strings.Replace(good, `"id":1,`, `"id":1,"user_id":2,`, 1), 200, false},
		{"undescribed status", good, 418, false},
	} {
		hdr := http.Header{"Content-Type": {"application/json"}}
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: tc.status, Header: hdr, Body: io.NopCloser(strings.NewReader(tc.body)), Options: opts})
		if (err == nil) != tc.ok {
			t.Errorf("%s: validation error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
