package loadgen

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// itemVU creates an item, then reads it back by the id the server gave,
// as a virtual user of a CRUD API does.
type itemVU struct {
	n       int
	id      string
	creates int
	bad     *atomic.Int64
}

func (v *itemVU) Next(r *Request) {
	r.Headers = append(r.Headers, [2]string{"X-VU", strconv.Itoa(v.n)})
	if v.id == "" {
		r.Method, r.Path, r.Body = "POST", "/items", []byte(fmt.Sprintf("vu%d-%d", v.n, v.creates))
		return
	}
	r.Path = "/items/" + v.id
}

func (v *itemVU) Answer(status int, body []byte, err error) {
	switch {
	case err != nil:
		v.bad.Add(1)
	case v.id == "" && status == http.StatusCreated:
		v.id = string(body)
		v.creates++
	case v.id != "" && status == http.StatusOK && strings.HasPrefix(string(body), fmt.Sprintf("vu%d-", v.n)):
		v.id = ""
	default:
		v.bad.Add(1)
	}
}

type itemScenario struct {
	mu  sync.Mutex
	vus map[int]*itemVU
	bad atomic.Int64
}

func (s *itemScenario) VU(n int) VU {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &itemVU{n: n, bad: &s.bad}
	s.vus[n] = v
	return v
}

func itemServer(t *testing.T) (url string, requests *atomic.Int64) {
	var mu sync.Mutex
	items := map[string]string{}
	var n atomic.Int64
	requests = &atomic.Int64{}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("X-Run") != "scenario" || r.Header.Get("X-VU") == "" {
			http.Error(w, "missing headers", http.StatusBadRequest)
			return
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/base/items":
			b, _ := io.ReadAll(r.Body)
			id := strconv.FormatInt(n.Add(1), 10)
			mu.Lock()
			items[id] = string(b)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, id)
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/base/items/"):
			mu.Lock()
			body, ok := items[strings.TrimPrefix(r.URL.Path, "/base/items/")]
			mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, body)
		default:
			http.Error(w, "no route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		}
	})
	return srv.URL + "/base/", requests
}

func TestScenarioClosed(t *testing.T) {
	url, requests := itemServer(t)
	sc := &itemScenario{vus: map[int]*itemVU{}}
	res := run(t, url, Connections(4), Requests(400), WithScenario(sc), Header("X-Run", "scenario"),
		Method("DELETE"), Body([]byte("ignored")))
	if res.Requests != 400 || res.Successes != 400 || requests.Load() != 400 {
		t.Fatalf("requests %d, successes %d, served %d; want 400 each (codes %v)", res.Requests, res.Successes, requests.Load(), res.StatusCodes)
	}
	if sc.bad.Load() != 0 {
		t.Fatalf("%d answers did not follow the VUs' script", sc.bad.Load())
	}
	if len(sc.vus) != 4 {
		t.Fatalf("%d VUs made, want one per connection", len(sc.vus))
	}
	// Each VU alternates, so creates lead reads by at most one per VU.
	if c, r := res.StatusCodes[201], res.StatusCodes[200]; c+r != 400 || c < r || c-r > 4 {
		t.Fatalf("status codes %v, want creates and reads alternating", res.StatusCodes)
	}
}

func TestScenarioOpen(t *testing.T) {
	url, _ := itemServer(t)
	sc := &itemScenario{vus: map[int]*itemVU{}}
	res := run(t, url, Rate(2000), Connections(8), Requests(200), WithScenario(sc), Header("X-Run", "scenario"))
	if res.Requests != 200 || res.Successes != 200 || sc.bad.Load() != 0 {
		t.Fatalf("requests %d, successes %d, off-script %d (codes %v)", res.Requests, res.Successes, sc.bad.Load(), res.StatusCodes)
	}
	if n := len(sc.vus); n < 1 || n > 8 {
		t.Fatalf("%d VUs, want 1 to 8 (started on demand)", n)
	}
}
