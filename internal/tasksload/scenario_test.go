package tasksload

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/highload-lab/hlab/loadgen"
)

func TestReadShare(t *testing.T) {
	if got := (&Scenario{Lists: true}).ReadShare(); math.Abs(got-0.65) > 0.001 {
		t.Fatalf("richer scenario: read share %.4f, want report C's 0.65", got)
	}
	if got := (&Scenario{}).ReadShare(); got != 0.25 {
		t.Fatalf("report's iteration: read share %.4f, want 1 get in 4 requests", got)
	}
}

// fakeAPI answers the task API's routes just enough for the scenario and
// counts what it is asked.
type fakeAPI struct {
	mu      sync.Mutex
	byRoute map[string]int
	logins  map[string]int
	next    atomic.Int64
	expire  atomic.Bool         // answer the next authenticated request 401
	byTask  map[string][]string // methods on each task, in order
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	if strings.HasPrefix(r.URL.Path, "/v1/tasks/") {
		route = r.Method + " /v1/tasks/{id}"
	}
	f.mu.Lock()
	f.byRoute[route]++
	if strings.HasPrefix(r.URL.Path, "/v1/tasks/") && f.byTask != nil {
		f.byTask[r.URL.Path] = append(f.byTask[r.URL.Path], r.Method)
	}
	f.mu.Unlock()
	if route == "POST /v1/auth/login" {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.logins[string(b)]++
		f.mu.Unlock()
		fmt.Fprintf(w, `{"user":{"id":1},"token":"tok","expires_at":"2030-01-01T00:00:00Z"}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer tok" || f.expire.CompareAndSwap(true, false) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch route {
	case "POST /v1/tasks":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"title":"t"}`, f.next.Add(1))
	case "DELETE /v1/tasks/{id}":
		w.WriteHeader(http.StatusNoContent)
	default:
		fmt.Fprint(w, `{}`)
	}
}

func TestScenarioMixAndSignIn(t *testing.T) {
	api := &fakeAPI{byRoute: map[string]int{}, logins: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	sc := &Scenario{Users: 2, Email: func(i int) string { return fmt.Sprintf("u%d@x", i) }, Password: "pw", Lists: true}
	if err := sc.SignIn(context.Background(), srv.URL, 8); err != nil {
		t.Fatal(err)
	}
	if len(api.logins) != 2 {
		t.Fatalf("SignIn signed in %d accounts, want 2 (8 VUs share them)", len(api.logins))
	}
	res, err := loadgen.Run(context.Background(), srv.URL, loadgen.Connections(8), loadgen.Requests(8*60*3), loadgen.WithScenario(sc))
	if err != nil {
		t.Fatal(err)
	}
	if res.Successes != res.Requests {
		t.Fatalf("%d of %d requests failed: %v", res.Requests-res.Successes, res.Requests, res.StatusCodes)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.byRoute["POST /v1/auth/login"] != 2 {
		t.Fatalf("VUs signed in again: %v", api.byRoute)
	}
	creates, deletes := api.byRoute["POST /v1/tasks"], api.byRoute["DELETE /v1/tasks/{id}"]
	reads := api.byRoute["GET /v1/tasks"] + api.byRoute["GET /v1/tasks/{id}"]
	writes := creates + api.byRoute["PATCH /v1/tasks/{id}"] + deletes
	share := float64(reads) / float64(reads+writes)
	if math.Abs(share-0.65) > 0.02 || creates-deletes > 8 {
		t.Fatalf("reads %d, writes %d (share %.3f), creates %d, deletes %d: want 65%% reads, each create deleted", reads, writes, share, creates, deletes)
	}

	// A 401 (the service's secret changed) makes the VU sign in again.
	api.expire.Store(true)
	before := api.byRoute["POST /v1/auth/login"]
	api.mu.Unlock()
	_, err = loadgen.Run(context.Background(), srv.URL, loadgen.Connections(1), loadgen.Requests(20), loadgen.WithScenario(sc))
	api.mu.Lock()
	if err != nil || api.byRoute["POST /v1/auth/login"] != before+1 {
		t.Fatalf("after a 401: %v, logins %d -> %d, want one more", err, before, api.byRoute["POST /v1/auth/login"])
	}
}

// TestScenarioReportIteration: without Lists each VU loops the report's
// k6 iteration exactly, create -> update -> get -> delete, on its own
// task, and nothing else.
func TestScenarioReportIteration(t *testing.T) {
	api := &fakeAPI{byRoute: map[string]int{}, logins: map[string]int{}, byTask: map[string][]string{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	sc := &Scenario{Users: 2, Email: func(i int) string { return fmt.Sprintf("u%d@x", i) }, Password: "pw"}
	if err := sc.SignIn(context.Background(), srv.URL, 8); err != nil {
		t.Fatal(err)
	}
	res, err := loadgen.Run(context.Background(), srv.URL, loadgen.Connections(8), loadgen.Requests(8*4*25), loadgen.WithScenario(sc))
	if err != nil || res.Successes != res.Requests {
		t.Fatalf("%v; %d of %d requests answered", err, res.Successes, res.Requests)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if n := api.byRoute["GET /v1/tasks"]; n != 0 {
		t.Fatalf("%d list reads, want none in the report's iteration", n)
	}
	whole := 0
	for path, seq := range api.byTask {
		got := strings.Join(seq, " ")
		if !strings.HasPrefix("PATCH GET DELETE", got) {
			t.Fatalf("%s: %s after its create, want PATCH GET DELETE", path, got)
		}
		if got == "PATCH GET DELETE" {
			whole++
		}
	}
	creates := api.byRoute["POST /v1/tasks"]
	if whole < creates-8 || creates < 8*20 {
		t.Fatalf("%d creates, %d whole iterations: want every VU's iterations complete but its last", creates, whole)
	}
}

func TestTaskID(t *testing.T) {
	for body, want := range map[string]int64{
		`{"id":42,"title":"x"}`:       42,
		`{"title":"x","id":7}`:        7,
		`{"id":-1,"title":"x"}`:       0,
		`{"error":"busy"}`:            0,
		`{"id":9223372036854775807,"`: 9223372036854775807,
	} {
		got, ok := taskID([]byte(body))
		if got != want || ok != (want > 0) {
			t.Errorf("taskID(%s) = %d, %v; want %d", body, got, ok, want)
		}
	}
}

// A login refused by the service's limit tells how to run the load test.
func TestSignInLimited(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":"too_many_logins","reason":"too many login attempts from your address"}`)
	}))
	defer srv.Close()
	sc := &Scenario{Users: 1, Email: func(i int) string { return fmt.Sprintf("u%d@x", i) }, Password: "pw"}
	err := sc.SignIn(context.Background(), srv.URL, 1)
	if err == nil || !strings.Contains(err.Error(), "--login-ip-rate 0") || !strings.Contains(err.Error(), "too_many_logins") {
		t.Fatalf("SignIn = %v, want the service's reason and the flag that lifts the limit", err)
	}
}
