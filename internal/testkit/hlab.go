package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var hlab struct {
	once sync.Once
	bin  string
	err  error
}

// HlabBinary returns the path of an hlab binary: $HLAB_BIN when set
// (absolute, or relative to the repository's root), else cmd/hlab built
// once per test process. The build goes to a directory of its own under
// the system's temporary directory, named for the process; since a test
// process cannot remove it as it exits, each build removes those of
// processes that have ended.
func HlabBinary(t testing.TB) string {
	t.Helper()
	hlab.once.Do(func() { hlab.bin, hlab.err = hlabBinary() })
	if hlab.err != nil {
		t.Fatal(hlab.err)
	}
	return hlab.bin
}

const buildPrefix = "hlab-testkit-"

func hlabBinary() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	if bin := os.Getenv("HLAB_BIN"); bin != "" {
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(root, bin)
		}
		return bin, nil
	}
	removeStaleBuilds()
	dir := filepath.Join(os.TempDir(), buildPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hlab")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hlab")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("go build ./cmd/hlab: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
}

// repoRoot is the nearest directory above the working directory that
// holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("testkit: no go.mod above the working directory")
		}
		dir = up
	}
}

// removeStaleBuilds removes the build directories of test processes that
// have ended.
func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), buildPrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}
