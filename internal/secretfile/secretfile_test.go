package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o640, true}, {0o440, true},
		{0o644, false}, {0o604, false}, {0o660, false}, {0o602, false},
	} {
		if err := os.WriteFile(path, []byte("  s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		switch {
		case tc.ok && (err != nil || got != "s3cret"):
			t.Errorf("mode %v: %q, %v; want s3cret", tc.mode, got, err)
		case !tc.ok && !errors.Is(err, ErrExposed):
			t.Errorf("mode %v: %q, %v; want ErrExposed", tc.mode, got, err)
		case !tc.ok && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("mode %v: the error shows the secret: %v", tc.mode, err)
		}
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, make([]byte, MaxBytes+1), 0o600)
	if _, err := Read(path); err == nil {
		t.Error("a file over MaxBytes was read")
	}
}
