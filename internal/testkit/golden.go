package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the golden file at path and fails t when they
// differ, showing got. With update (each package's -update flag, which
// stays the package's own so that no two flags of one name meet in a test
// binary) it first writes got to path, creating its folder.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the test got (go test -update rewrites it if the change is meant):\n%s", path, got)
	}
}
