package loadgen

import (
	"strings"

	"github.com/valyala/fasthttp"
)

// A Scenario makes the virtual users of a multi-step load, for targets
// whose requests depend on earlier answers (sign in once, then create a
// task, update it by the id the server gave, read it, delete it), like a
// k6 script. Without one, every request of a run is the same.
//
// With a Scenario, the URL given to Run is the base that each
// Request.Path is appended to; the Method and Body options are ignored,
// and Header options still apply to every request, before the VU's own.
// Each worker runs one VU for its whole life: in the closed model the
// Connections workers are VUs 0..n-1; in the open model workers, and so
// VUs, are started on demand up to the cap. Latency, status codes and
// errors are counted over all requests of all VUs, as without a Scenario.
type Scenario interface {
	// VU returns virtual user n (0, 1, ...). Run calls it from the
	// worker's goroutine before the worker's first request; calls for
	// different n may run concurrently. A Scenario may keep state across
	// runs (a token per n, so a user signs in only once).
	VU(n int) VU
}

// A VU is one virtual user's script. Its methods are called from one
// goroutine, alternately: Next, Answer, Next, Answer, ...
type VU interface {
	// Next fills in the VU's next request. r holds the previous one, so
	// its Headers and Body may be reused; Run resets Method, Path, Body
	// and Headers (to length 0) before the call.
	Next(r *Request)
	// Answer hands over the answer to the request Next filled in: its
	// status code and body, or the transport error (status 0, body nil).
	// body is valid only during the call.
	Answer(status int, body []byte, err error)
}

// Request is one request of a VU.
type Request struct {
	Method  string      // "" = GET
	Path    string      // path and query, appended to Run's URL
	Body    []byte      // sent as is; nil = no body
	Headers [][2]string // name and value, added after the run's Header options
}

// WithScenario runs s's virtual users instead of one repeated request.
func WithScenario(s Scenario) Option {
	return func(c *cfg) { c.scenario = s }
}

// scripted is one worker's VU and the request it reuses.
type scripted struct {
	vu   VU
	base string // Run's URL without a trailing slash
	next Request
}

func (r *runner) newScripted(id int) *scripted {
	if r.c.scenario == nil {
		return nil
	}
	return &scripted{vu: r.c.scenario.VU(id), base: strings.TrimSuffix(r.url, "/")}
}

// fill asks the VU for its next request and writes it into req.
func (r *runner) fill(s *scripted, req *fasthttp.Request) {
	n := &s.next
	n.Method, n.Path, n.Body, n.Headers = "", "", nil, n.Headers[:0]
	s.vu.Next(n)
	req.Reset()
	req.Header.DisableNormalizing()
	req.SetRequestURI(s.base + n.Path)
	if n.Method == "" {
		n.Method = DefaultMethod
	}
	req.Header.SetMethod(n.Method)
	r.addHeaders(req)
	for _, h := range n.Headers {
		req.Header.Add(h[0], h[1])
	}
	if n.Body != nil {
		req.SetBodyRaw(n.Body)
	}
}

// answer hands the result of the request fill made to the VU.
func (s *scripted) answer(resp *fasthttp.Response, err error) {
	if err != nil {
		s.vu.Answer(0, nil, err)
		return
	}
	s.vu.Answer(resp.StatusCode(), resp.Body(), nil)
}
