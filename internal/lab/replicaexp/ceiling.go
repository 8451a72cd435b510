package replicaexp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/hello"
)

// ceilingRounds is how many rounds the catalog and its ceiling run:
// more than the lab's least (3), for an interval narrow enough to judge
// catalog-vs-hello's 0.95, within the quick mode's budget (a round is two
// runs, some 11 s, beside the warm-up's 9 s or more).
const ceilingRounds = 4

// ceiling measures the hello world and the catalog at 100 connections in
// rounds, adds the hello row and stops it; it returns the catalog's row
// (added with the other connection counts).
func (b *bench) ceiling(ctx context.Context, hello, cat *lab.Service, answer helloConfig) (*labresult.Row, error) {
	rows, err := b.paired(ctx, ceilingRounds, []setup{
		// Both warm until their throughput stops climbing, not for the
		// lab's one second: after that second, hello served a fifth less
		// in its first round than in the next ones (57.7k then 72.1k and
		// 71.1k req/s in the reference run, whose catalog runs stayed
		// within 3%; 55.2k then 70.3k and 71.7k in another), and that
		// one round alone spread the pairs' ratios by a fifth.
		{key: helloKey, svc: hello, path: "/", conns: compareConns, steady: true},
		{key: catalogKey(compareConns), svc: cat, path: catalogPath, conns: compareConns, steady: true},
	})
	if err != nil {
		return nil, err
	}
	helloRow, at100 := rows[0], rows[1]
	hello.Stop()
	helloRow.AddNote("net/http hello world with hlab's shared server (timeouts, request metrics), answering what the catalog answers: %s; the same quota, measured in rounds with the catalog: its ceiling; %s",
		answer, coresText(helloRow))
	b.run.AddRow(helloRow)
	return at100, nil
}

// helloConfig is the hello world that answers like the catalog.
type helloConfig struct{ hello.Config }

// String says what the hello world answers, for the row's note.
func (c helloConfig) String() string {
	s := fmt.Sprintf("a %d-byte JSON body", c.BodyBytes)
	if c.ContentType != "" {
		s += " as " + c.ContentType
	}
	if len(c.Headers) > 0 {
		names := make([]string, len(c.Headers))
		for i, h := range c.Headers {
			names[i], _, _ = strings.Cut(h, ":")
		}
		s += " with " + strings.Join(names, ", ")
	}
	return s
}

// sameAnswer reads one answer of the catalog's GET catalogPath, once its
// replica is fresh (/readyz), and returns the hello world that writes as
// much: a JSON body of the same size, the same Content-Type, and the
// catalog's other headers (X-Replica-Age) with values of the same
// length, so that both answers carry the same bytes and header count
// and what differs between the rows is the catalog's own work.
func sameAnswer(ctx context.Context, cat *lab.Service) (helloConfig, error) {
	if err := deps.AwaitHTTP(ctx, cat.URL("/readyz"), 30*time.Second, cat.Proc.Done()); err != nil {
		return helloConfig{}, fmt.Errorf("replica: the catalog's replica did not become fresh: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cat.URL(catalogPath), nil)
	if err != nil {
		return helloConfig{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return helloConfig{}, fmt.Errorf("replica: the catalog's answer to GET %s: %w", catalogPath, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hello.MaxBodyBytes+1))
	if err != nil || resp.StatusCode != http.StatusOK {
		return helloConfig{}, fmt.Errorf("replica: the catalog answered GET %s with %s (%.200q, %v): its ceiling needs a 200", catalogPath, resp.Status, body, err)
	}
	return helloLike(resp.Header, len(body)), nil
}

// helloLike is the hello world whose answer has a body of bodyBytes and
// the headers of header: Date and Content-Length are hello's own.
func helloLike(header http.Header, bodyBytes int) helloConfig {
	c := hello.Config{BodyBytes: bodyBytes}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		c.ContentType = ct
	}
	for name, values := range header {
		switch name {
		case "Content-Type", "Content-Length", "Date":
			continue
		}
		for _, v := range values {
			c.Headers = append(c.Headers, name+": "+v)
		}
	}
	slices.Sort(c.Headers)
	return helloConfig{c}
}
