package tasks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

func TestTokens(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newTokenSigner([]byte("0123456789abcdef0123"), time.Hour, "postgres://db:5432/tasks")
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now }
	tok, exp := s.issue(42)
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry %v", exp)
	}
	if uid, ok := s.verify(tok); !ok || uid != 42 {
		t.Fatalf("verify(issued) = %d, %v", uid, ok)
	}
	if _, until, ok := s.verifyUntil(tok); !ok || !until.Equal(exp) {
		t.Fatalf("verifyUntil(issued) expires %v, want %v (a WebSocket closes then)", until, exp)
	}
	other, _ := newTokenSigner([]byte("another secret, long enough"), time.Hour, "postgres://db:5432/tasks")
	other.now = s.now
	// A deployment sharing the secret, not the audience (staging, say).
	staging, _ := newTokenSigner([]byte("0123456789abcdef0123"), time.Hour, "postgres://staging:5432/tasks")
	staging.now = s.now
	ticket, _ := s.ticket(42, exp)
	for name, tc := range map[string]struct {
		signer *tokenSigner
		tok    string
		at     time.Time
	}{
		"expired":        {s, tok, now.Add(time.Hour)},
		"other secret":   {other, tok, now},
		"other audience": {staging, tok, now},
		"truncated":      {s, tok[:len(tok)-1], now},
		"bad prefix":     {s, "t1." + strings.TrimPrefix(tok, "t2."), now},
		"swapped":        {s, func() string { a, _ := s.issue(43); return tok[:25] + a[25:] }(), now},
		"empty":          {s, "", now},
		// The same bytes spelt another way: the last character's unused
		// low bit set, which a lax base64 decoder ignores.
		"another spelling": {s, respell(tok), now},
		"a ticket":         {s, ticket, now},
	} {
		tc.signer.now = func() time.Time { return tc.at }
		if uid, ok := tc.signer.verify(tc.tok); ok {
			t.Errorf("%s: verify = %d, ok; want refused", name, uid)
		}
		tc.signer.now = func() time.Time { return now }
	}
}

// respell returns tok with its last character's lowest bit flipped: the
// same bytes to a base64 decoder that ignores the unused bits.
func respell(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[i^1])
}

// A WebSocket ticket opens for TicketTTL, and not as a bearer token; a
// bearer token is no ticket. (That it is good once, on every instance
// together, is TestTicketGoodOnceAcrossInstances'.)
func TestTickets(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newTokenSigner([]byte("0123456789abcdef0123"), time.Hour, "aud")
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now }
	tok, session := s.issue(7)
	tk, exp := s.ticket(7, session)
	if _, _, _, _, ok := s.openTicket(tok); ok {
		t.Error("a bearer token was taken as a ticket")
	}
	if _, _, _, _, ok := s.openTicket(respell(tk)); ok {
		t.Error("a ticket spelt another way was taken")
	}
	uid, until, expires, mac, ok := s.openTicket(tk)
	if !ok || uid != 7 || !until.Equal(session) || !expires.Equal(exp) || len(mac) == 0 {
		t.Fatalf("openTicket = %d, %v, %v, %x, %v; want user 7 until the bearer token's expiry %v, the ticket's %v, and its MAC", uid, until, expires, mac, ok, session, exp)
	}
	late, _ := s.ticket(7, session)
	s.now = func() time.Time { return now.Add(TicketTTL) }
	if _, _, _, _, ok := s.openTicket(late); ok {
		t.Error("a ticket was good past TicketTTL")
	}
}

func TestLogsCarryTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(traceLogs{slog.NewJSONHandler(&buf, nil)})
	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	sid, _ := trace.SpanIDFromHex("0102030405060708")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.With("service", "tasks").InfoContext(ctx, "hello")
	if !strings.Contains(buf.String(), `"trace_id":"0102030405060708090a0b0c0d0e0f10"`) || !strings.Contains(buf.String(), `"span_id":"0102030405060708"`) {
		t.Fatalf("log line %s lacks the trace and span ids", buf.String())
	}
}

func TestRaiseFileLimit(t *testing.T) {
	soft, hard, err := RaiseFileLimit(WantFileLimit)
	if err != nil {
		t.Fatal(err)
	}
	if soft != hard || soft < 1024 {
		t.Fatalf("open-file limit soft %d hard %d, want soft raised to hard", soft, hard)
	}
}

func BenchmarkTokenVerify(b *testing.B) {
	s, err := newTokenSigner([]byte("0123456789abcdef0123"), time.Hour, "postgres://db:5432/tasks")
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := s.issue(42)
	for b.Loop() {
		if _, ok := s.verify(tok); !ok {
			b.Fatal("refused")
		}
	}
}
