// Package hello is the smallest Go HTTP service: GET / answers "Hello,
// World!". The lab runs it under the same quota as a service it measures,
// in the same run, as the ceiling of what net/http (with hlab's shared
// /healthz, /metrics and request metrics) serves on that quota.
//
// A ceiling is fair only when it writes what the measured service
// writes: a 14-byte text answer costs the kernel and net/http less than a
// 194-byte JSON one. Config.BodyBytes, ContentType and Headers shape the
// answer like the measured service's (the lab reads one of its answers
// and passes their sizes), so that the difference between the two is
// the service's own work: its routing, its lookup, its encoding.
package hello

import (
	"flag"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// Bounds of a Config: an answer is built once, in memory.
const (
	MaxBodyBytes = 1 << 20
	MaxHeaders   = 16
	// minJSONBytes is the smallest JSON body: {"hello":""} and a newline.
	minJSONBytes = len(`{"hello":""}` + "\n")
)

// Config shapes the answer. The zero value answers "Hello, World!\n" as
// text/plain.
type Config struct {
	// BodyBytes, when set, makes the answer a JSON object of exactly this
	// many bytes, newline included (at least 13, at most MaxBodyBytes),
	// with Content-Type application/json unless ContentType says
	// otherwise.
	BodyBytes int
	// ContentType overrides the answer's Content-Type.
	ContentType string
	// Headers are set on every answer, each "Name: value" (at most
	// MaxHeaders; a value cannot hold a comma, the flag's separator).
	Headers []string
}

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.BodyBytes, "body-bytes", c.BodyBytes, fmt.Sprintf("answer a JSON object of exactly this many bytes, newline included (%d-%d), as application/json, instead of Hello, World! (0): a ceiling that writes as much as the service it stands beside", minJSONBytes, MaxBodyBytes))
	fs.StringVar(&c.ContentType, "content-type", c.ContentType, "the answer's Content-Type (default text/plain; charset=utf-8, or application/json with --body-bytes)")
	fs.Var(cliflag.List(&c.Headers), "header", fmt.Sprintf(`headers set on every answer, "Name: value", comma-separated or repeated (at most %d; a value cannot hold a comma), e.g. --header "X-Replica-Age: 0.123" to answer with the header count and size of the service measured beside it`, MaxHeaders))
}

// Args returns the command line flags that make "hlab serve hello" run c.
func (c Config) Args() []string { return cliflag.Args(c) }

// answer is what every GET / writes, built once.
type answer struct {
	header http.Header
	body   []byte
}

func (c Config) answer() (answer, error) {
	a := answer{header: http.Header{}, body: []byte("Hello, World!\n")}
	contentType := "text/plain; charset=utf-8"
	switch {
	case c.BodyBytes < 0 || c.BodyBytes > MaxBodyBytes || (c.BodyBytes > 0 && c.BodyBytes < minJSONBytes):
		return a, fmt.Errorf("hello: --body-bytes must be %d-%d (or 0 for Hello, World!), not %d", minJSONBytes, MaxBodyBytes, c.BodyBytes)
	case c.BodyBytes > 0:
		a.body = jsonBody(c.BodyBytes)
		contentType = "application/json"
	}
	if c.ContentType != "" {
		contentType = c.ContentType
	}
	a.header.Set("Content-Type", contentType)
	if len(c.Headers) > MaxHeaders {
		return a, fmt.Errorf("hello: at most %d --header, not %d", MaxHeaders, len(c.Headers))
	}
	for _, h := range c.Headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || !validName(name) {
			return a, fmt.Errorf(`hello: --header %q is not "Name: value" (a name of letters, digits and '-')`, h)
		}
		a.header.Set(name, strings.TrimSpace(value))
	}
	return a, nil
}

func validName(name string) bool {
	for _, r := range name {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// jsonBody is {"hello":"xxx...x"} and a newline, n bytes in all (n >=
// minJSONBytes): the shape of a JSON answer, written by an Encoder.
func jsonBody(n int) []byte {
	return []byte(`{"hello":"` + strings.Repeat("x", n-minJSONBytes) + `"}` + "\n")
}

// New returns the handler c describes: GET / answers; other paths 404.
func New(c Config) (http.Handler, error) {
	a, err := c.answer()
	if err != nil {
		return nil, err
	}
	// Each header's value is shared by every answer, set by its canonical
	// key as the measured service's own cheapest path would; full slices,
	// so an Add by a wrapper copies instead of writing the shared array.
	type kv struct {
		key   string
		value []string
	}
	var header []kv
	for k, v := range a.header {
		header = append(header, kv{textproto.CanonicalMIMEHeaderKey(k), v[:1:1]})
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, kv := range header {
			h[kv.key] = kv.value
		}
		w.Write(a.body)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, serve)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A ceiling routes no dearer than what it stands beside: a plain
		// GET / skips the mux's match, as the catalog's GET
		// /customers/{id} does; the rest (404, 405) the mux answers.
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			r.Pattern = pattern
			serve(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}

// pattern is the route of the answer, and its path label in the request
// metrics.
const pattern = "GET /{$}"
