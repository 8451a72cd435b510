package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// schemathesisVenv is where scripts/install-deps.sh installs the pinned
// schemathesis, relative to the repository's root.
const schemathesisVenv = "bin/schemathesis"

// Schemathesis returns the path of the schemathesis command that
// scripts/install-deps.sh installs ($HLAB_SCHEMATHESIS when set). It
// skips t in -short mode (a run takes about a minute) and when it is not
// installed, or fails t then when HLAB_REQUIRE_DEPS is set, so that
// make test cannot pass by skipping it.
func Schemathesis(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs schemathesis")
	}
	bin := os.Getenv("HLAB_SCHEMATHESIS")
	if bin == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, schemathesisVenv, "bin", "schemathesis")
	}
	if err := exec.Command(bin, "--version").Run(); err != nil {
		msg := "schemathesis is not installed at " + bin + " (" + err.Error() + "): run scripts/install-deps.sh"
		if os.Getenv("HLAB_REQUIRE_DEPS") != "" {
			t.Fatal(msg + " (HLAB_REQUIRE_DEPS is set)")
		}
		t.Skip(msg)
	}
	return bin
}
