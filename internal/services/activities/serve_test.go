package activities_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/server/servertest"
	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestServeSlowBody: a POST whose body is trickled a byte a second is cut
// off at the server's read timeout, and its connection closed, instead of
// holding the connection (and a handler) for as long as the client likes.
func TestServeSlowBody(t *testing.T) {
	postgres(t)
	ln := testkit.Listen(t)
	testkit.Background(t, "Serve", func(ctx context.Context) error {
		return activities.Serve(ctx, server.Config{Listener: ln, ReadTimeout: time.Second},
			activities.Config{DSN: pgDSN, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	})
	addr := ln.Addr().String()
	testkit.Healthy(t, 30*time.Second, "http://"+addr+"/healthz")

	answer, held, err := servertest.Trickle(addr, "POST", "/activities", "application/json", "", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatal("the server still holds the connection of a body trickled a byte a second after 20 s (read timeout 1 s)")
	}
	if len(answer) > 0 && !bytes.HasPrefix(answer, []byte("HTTP/1.1 408 ")) {
		t.Errorf("answer before the close: %.80q, want 408", answer)
	}
}
