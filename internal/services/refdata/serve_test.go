package refdata_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/server/servertest"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/testkit"
)

// stubService is a refdata.Service without a database.
type stubService struct{}

func (stubService) Run(ctx context.Context) { <-ctx.Done() }
func (stubService) Ready() error            { return nil }
func (stubService) Fresh() error            { return nil }
func (stubService) Close()                  {}
func (stubService) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// TestServeSlowBody: catalog and pricing serve through refdata.Serve,
// which passes the shared server's read timeout on: a request whose body
// is trickled a byte a second is cut off at it (1 s here; well before
// the 10 s bound on headers) and its connection closed. Their handlers
// do not read bodies; the server reads what is left to reuse the
// connection, under the same deadline.
func TestServeSlowBody(t *testing.T) {
	ln := testkit.Listen(t)
	testkit.Background(t, "Serve", func(ctx context.Context) error {
		return refdata.Serve(ctx, server.Config{Name: "catalog", Listener: ln, ReadTimeout: time.Second},
			refdata.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
			func(context.Context, refdata.Config) (refdata.Service, error) { return stubService{}, nil })
	})
	_, held, err := servertest.Trickle(ln.Addr().String(), "POST", "/customers", "", "", 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatal("the server still holds the connection of a body trickled a byte a second after 8 s (read timeout 1 s)")
	}
}
