package replicaexp

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
)

// TestRestartRows measures the restart rows on a small table: the second
// start comes from the file, and both end with Postgres's rows.
func TestRestartRows(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	r := &restarter{slot: "lab_restart_test", dsn: dsn, path: filepath.Join(t.TempDir(), "restart.replica"), log: slog.New(slog.DiscardHandler)}
	snap, disk, err := r.measure(context.Background(), 20_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []*labresult.Row{snap, disk} {
		if row.RowsDiffering == nil || *row.RowsDiffering != 0 || row.Value(readyS) <= 0 || row.Value(rowsCompared) < 19_000 {
			t.Errorf("%s: rows_differing %v, ready_s %v, rows %v", row.Key, row.Value(labresult.RowsDiffering), row.Value(readyS), row.Value(rowsCompared))
		}
	}
	if snap.Value(startedFromDisk) != 0 || disk.Value(startedFromDisk) != 1 {
		t.Errorf("from_disk: %v from a snapshot, %v from the file; want 0 and 1 (%s)", snap.Value(startedFromDisk), disk.Value(startedFromDisk), disk.Note)
	}
}
