package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFreshLogs: a logs directory the lab made is emptied for the next
// run; one it did not make is left alone, with an error that says what to
// do (hlab lab --report . must not delete ./logs).
func TestFreshLogs(t *testing.T) {
	root := t.TempDir()
	mine := filepath.Join(root, "mine")
	if err := freshLogs(mine); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mine, "old.log"), []byte("x"), 0o644)
	if err := freshLogs(mine); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mine, "old.log")); !os.IsNotExist(err) {
		t.Errorf("the last run's log is still there: %v", err)
	}

	// Logs of a lab from before the mark: experiments' folders only.
	old := filepath.Join(root, "old")
	os.MkdirAll(filepath.Join(old, "scale"), 0o755)
	if err := freshLogs(old); err != nil {
		t.Errorf("old lab logs: %v", err)
	}

	theirs := filepath.Join(root, "logs")
	os.MkdirAll(theirs, 0o755)
	os.WriteFile(filepath.Join(theirs, "app.log"), []byte("keep me"), 0o644)
	err := freshLogs(theirs)
	if err == nil || !strings.Contains(err.Error(), "--report") {
		t.Fatalf("err = %v; want a refusal that names --report", err)
	}
	if b, _ := os.ReadFile(filepath.Join(theirs, "app.log")); string(b) != "keep me" {
		t.Error("a directory the lab did not make was changed")
	}
}
