package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func mustParseTokens(t *testing.T, file string) *Tokens {
	t.Helper()
	ts, err := ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestParseTokenQuotas: each quota key sets its field; a line without
// name= is called line-N.
func TestParseTokenQuotas(t *testing.T) {
	ts := mustParseTokens(t, `# comment
a publish=* name=billing publish-rate=500 publish-bytes=10MiB max-streams=10
b publish=* publish-bytes=1048576 name=b.2
c publish=* publish-bytes=512KiB name=c_3
d subscribe=* groups=* max-streams=1 name=d-4
e publish=*
`)
	for i, want := range []struct {
		name string
		q    quota
	}{
		{"billing", quota{publishRate: 500, publishBytes: 10 << 20, maxStreams: 10}},
		{"b.2", quota{publishBytes: 1 << 20}},
		{"c_3", quota{publishBytes: 512 << 10}},
		{"d-4", quota{maxStreams: 1}},
		{"line-6", quota{}},
	} {
		if got := ts.entries[i]; got.name != want.name || got.quota != want.q {
			t.Errorf("line %d: name %q quota %+v, want %q %+v", got.line, got.name, got.quota, want.name, want.q)
		}
	}
}

// TestCallersSurviveReload: a reload that keeps a token's name keeps its
// bucket and streams; a changed rate applies at once, to a stream already
// waiting; a name gone from the file with no stream is forgotten.
func TestCallersSurviveReload(t *testing.T) {
	cs := newCallers(prometheus.NewRegistry())
	slow := mustParseTokens(t, "tok publish=* name=billing publish-rate=1\nother publish=* name=other\n")
	cs.apply(slow)
	c, err := cs.open(&slow.entries[0])
	if err != nil {
		t.Fatal(err)
	}
	c.received(1000, 0) // owes 999 s at 1/s

	done := make(chan bool)
	go func() { done <- c.waitTurn(context.Background(), nil) }()
	select {
	case <-done:
		t.Fatal("a stream 999 messages past its rate of 1/s did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	fast := mustParseTokens(t, "tok2 publish=* name=billing publish-rate=10000000\n")
	cs.apply(fast)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("waitTurn gave up")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream still waits at the old rate after the reload raised it")
	}
	if got, _ := cs.open(&fast.entries[0]); got != c {
		t.Fatal("a reload that kept the name made a new caller: its bucket and streams were lost")
	}
	cs.mu.Lock()
	_, kept := cs.byName["other"]
	cs.mu.Unlock()
	if kept {
		t.Fatal(`"other", gone from the file and holding no stream, is still kept`)
	}
}

// TestCallerMaxStreams: past max-streams a stream is refused naming the
// quota and the token's name; a place given back is taken again.
func TestCallerMaxStreams(t *testing.T) {
	cs := newCallers(prometheus.NewRegistry())
	ts := mustParseTokens(t, "tok publish=* name=billing max-streams=2\n")
	cs.apply(ts)
	tok := &ts.entries[0]
	a, _ := cs.open(tok)
	if _, err := cs.open(tok); err != nil {
		t.Fatal(err)
	}
	_, err := cs.open(tok)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "token billing holds its max-streams=2 streams") {
		t.Fatalf("third stream: %v, want ResourceExhausted naming max-streams=2 and billing", err)
	}
	a.closeStream()
	if _, err := cs.open(tok); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
}
