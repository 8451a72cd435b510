// Package tasksload is report C's k6 load script for the task API (hlab
// serve tasks) as a loadgen scenario: virtual users that sign in once and
// loop create, update, get (and lists), delete. "hlab load --scenario
// tasks" and the crud experiment both drive the API with it.
package tasksload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/highload-lab/hlab/loadgen"
)

// Scenario is report C's k6 script as a loadgen.Scenario, for the task
// API (hlab serve tasks). Each virtual user is one device of an account:
// it signs in once, then loops the report's iteration, create -> update
// -> get -> delete. With Lists it loops a richer iteration instead,
// create -> update -> get -> k lists -> delete, with k alternating 5 and
// 4 (5 in four iterations of seven) so that reads are 65% and writes 35%
// of the requests, the mix the report gives for its API's traffic (its
// load test's iteration is 25% reads). Tokens are kept per account across
// runs: an account signs in once, and its devices share the token (tokens
// name the user, not the device). A VU's state is kept too, so the
// Scenario must not run twice at once.
type Scenario struct {
	// Users is how many accounts the VUs share: VU n signs in as account
	// n%Users + 1, so with 100 VUs and 25 users each user has 4 devices
	// working at once (the case the report's lock bug hurt).
	Users int
	// Email returns account i's email (1-based); Password is every account's.
	Email    func(i int) string
	Password string
	// Lists adds the list reads to each iteration (the richer scenario,
	// 65% reads); false is the report's own iteration.
	Lists bool

	mu     sync.Mutex
	tokens map[int]string // by account
	vus    map[int]*vu    // by VU number, kept across runs
}

// Clone returns a scenario with s's accounts and tokens and VUs of its
// own, for another service: a VU's task lives in its service's database.
func (s *Scenario) Clone() *Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Scenario{Users: s.Users, Email: s.Email, Password: s.Password, Lists: s.Lists, tokens: map[int]string{}}
	for k, v := range s.tokens {
		c.tokens[k] = v
	}
	return c
}

var _ loadgen.Scenario = (*Scenario)(nil)

// The list reads a VU makes, in turn.
var listPaths = []string{
	"/v1/tasks?limit=20",
	"/v1/tasks?status=todo&limit=20",
	"/v1/tasks?sort=due_at&limit=20",
	"/v1/tasks?sort=-priority&limit=10&offset=10",
	"/v1/tasks?limit=20&offset=20",
}

// listsIn returns the list reads of iteration i: with the create, update,
// get and delete, 39 reads and 21 writes every 7 iterations (65/35);
// none in the report's iteration.
func (s *Scenario) listsIn(i int) int {
	switch {
	case !s.Lists:
		return 0
	case i%7 < 4:
		return 5
	}
	return 4
}

// ReadShare is the scenario's share of reads over a whole cycle of
// iterations, sign-in aside (for the record: 39/60 = 0.65 with Lists,
// 1/4 without).
func (s *Scenario) ReadShare() float64 {
	reads, all := 0, 0
	for i := range 7 {
		reads += 1 + s.listsIn(i)
		all += 4 + s.listsIn(i)
	}
	return float64(reads) / float64(all)
}

func (s *Scenario) account(n int) int { return n%max(1, s.Users) + 1 }

// Token returns VU n's token, its account's: empty until it signed in.
func (s *Scenario) Token(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[s.account(n)]
}

func (s *Scenario) setToken(n int, tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[int]string{}
	}
	if tok == "" {
		delete(s.tokens, s.account(n))
	} else {
		s.tokens[s.account(n)] = tok
	}
}

// VU implements loadgen.Scenario. A VU continues where it stopped in the
// previous run (mid-iteration, with its task), so short runs measure the
// whole iteration's mix, not just its first steps.
func (s *Scenario) VU(n int) loadgen.VU {
	s.mu.Lock()
	v := s.vus[n]
	if v == nil {
		v = &vu{s: s, n: n}
		if s.vus == nil {
			s.vus = map[int]*vu{}
		}
		s.vus[n] = v
	}
	tok := s.tokens[s.account(n)]
	s.mu.Unlock()
	v.setToken(tok)
	return v
}

type step int

const (
	stepLogin step = iota
	stepCreate
	stepUpdate
	stepGet
	stepList
	stepDelete
)

type vu struct {
	s     *Scenario
	n     int
	auth  [][2]string // the Authorization header, nil while signed out
	iter  int
	phase int // 0 create, 1 update, 2 get, 3..3+k-1 lists, 3+k delete (k = 0: the report's iteration)
	lists int // list reads made, to rotate listPaths
	task  string
	last  step
	body  []byte
}

func (v *vu) setToken(tok string) {
	if tok == "" {
		v.auth = nil
		return
	}
	v.auth = [][2]string{{"Authorization", "Bearer " + tok}}
}

var (
	jsonHeader = [2]string{"Content-Type", "application/json"}
	updateBody = []byte(`{"status":"doing","priority":3}`)
)

func (v *vu) Next(r *loadgen.Request) {
	if v.auth == nil {
		v.last = stepLogin
		r.Method, r.Path = "POST", "/v1/auth/login"
		v.body = v.body[:0]
		v.body = fmt.Appendf(v.body, `{"email":%q,"password":%q}`, v.s.Email(v.s.account(v.n)), v.s.Password)
		r.Body = v.body
		r.Headers = append(r.Headers, jsonHeader)
		return
	}
	r.Headers = append(r.Headers, v.auth...)
	k := v.s.listsIn(v.iter)
	switch {
	case v.phase == 0:
		v.last = stepCreate
		r.Method, r.Path = "POST", "/v1/tasks"
		b := append(v.body[:0], `{"title":"load task `...)
		b = strconv.AppendInt(b, int64(v.n), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(v.iter), 10)
		b = append(b, `","description":"made by the tasks scenario of hlab load","priority":`...)
		b = strconv.AppendInt(b, int64(v.iter%4), 10)
		b = append(b, `,"due_at":"2031-01-02T03:04:05Z"}`...)
		v.body = b
		r.Body = b
		r.Headers = append(r.Headers, jsonHeader)
	case v.phase == 1:
		v.last = stepUpdate
		r.Method, r.Path = "PATCH", v.task
		r.Body = updateBody
		r.Headers = append(r.Headers, jsonHeader)
	case v.phase == 2:
		v.last = stepGet
		r.Method, r.Path = "GET", v.task
	case v.phase < 3+k:
		v.last = stepList
		r.Method, r.Path = "GET", listPaths[v.lists%len(listPaths)]
		v.lists++
	default:
		v.last = stepDelete
		r.Method, r.Path = "DELETE", v.task
	}
}

func (v *vu) Answer(status int, body []byte, err error) {
	if status == http.StatusUnauthorized && v.last != stepLogin {
		v.setToken("") // signed out (the secret changed): sign in again
		return
	}
	switch v.last {
	case stepLogin:
		if status == http.StatusOK {
			var s struct {
				Token string `json:"token"`
			}
			if json.Unmarshal(body, &s) == nil && s.Token != "" {
				v.s.setToken(v.n, s.Token)
				v.setToken(s.Token)
			}
		}
	case stepCreate:
		if status == http.StatusCreated {
			if id, ok := taskID(body); ok {
				v.task = "/v1/tasks/" + strconv.FormatInt(id, 10)
				v.phase = 1
			}
		}
		// Otherwise create again: there is no task to work on.
	case stepDelete:
		v.phase = 0
		v.iter++
	default:
		v.phase++
	}
}

// taskID reads the id of a task answer, which starts {"id":N, (Task's
// first field), without decoding the whole body.
func taskID(body []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"id":`))
	if !ok {
		var t struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(body, &t) != nil || t.ID <= 0 {
			return 0, false
		}
		return t.ID, true
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// SignIn signs the accounts of VUs 0..vus-1 in before a measurement, a
// few at a time, so the first measured run does not spend its time
// hashing passwords. Each account signs in once, all from this machine's
// address: the task API's login limit per address (by default 100 at
// once, then 60 a minute) refuses more accounts, and SignIn says so.
func (s *Scenario) SignIn(ctx context.Context, base string, vus int) error {
	client := &http.Client{Timeout: 30 * time.Second}
	vus = min(vus, max(1, s.Users)) // VUs beyond share these accounts
	errs := make(chan error, vus)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for n := range vus {
		if s.Token(n) != "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			body := fmt.Sprintf(`{"email":%q,"password":%q}`, s.Email(s.account(n)), s.Password)
			status, b, err := post(ctx, client, base+"/v1/auth/login", "", body)
			if status == http.StatusTooManyRequests {
				errs <- fmt.Errorf("crud: sign in VU %d as %s: the service limits logins (%s): every account signs in from this "+
					"machine's address, so start hlab serve tasks with --login-ip-rate 0 for the load test, or use fewer --accounts", n, s.Email(s.account(n)), b)
				return
			}
			if err != nil || status != http.StatusOK {
				errs <- fmt.Errorf("crud: sign in VU %d as %s: %d %s %v", n, s.Email(s.account(n)), status, b, err)
				return
			}
			var out struct {
				Token string `json:"token"`
			}
			if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
				errs <- fmt.Errorf("crud: sign in VU %d: no token in %s", n, b)
				return
			}
			s.setToken(n, out.Token)
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when there was none
}

// SignUp creates the scenario's accounts on a service that does not have
// them (hlab load --scenario tasks); an account that exists is fine.
func (s *Scenario) SignUp(ctx context.Context, base string) error {
	client := &http.Client{Timeout: 30 * time.Second}
	for i := 1; i <= max(1, s.Users); i++ {
		body := fmt.Sprintf(`{"email":%q,"password":%q,"name":"load user %d"}`, s.Email(i), s.Password, i)
		status, b, err := post(ctx, client, base+"/v1/auth/signup", "", body)
		if err != nil {
			return fmt.Errorf("crud: sign up %s: %w", s.Email(i), err)
		}
		if status != http.StatusCreated && status != http.StatusConflict {
			return fmt.Errorf("crud: sign up %s: %d %s", s.Email(i), status, b)
		}
	}
	return nil
}

func post(ctx context.Context, c *http.Client, url, token, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && !errors.Is(err, io.EOF) {
		return resp.StatusCode, b, err
	}
	return resp.StatusCode, bytes.TrimSpace(b), nil
}
