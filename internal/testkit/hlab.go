package testkit

import (
	"bytes"
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

// HlabBinary returns the path of an hlab binary: $HLAB_BIN when set
// (absolute, or relative to the repository's root), else ./cmd/hlab built
// once per test process (Binary). It skips t in -short mode: what runs
// hlab (a service, an experiment, the lab) takes a build and up to
// minutes, so those tests need no skip of their own.
func HlabBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the hlab binary")
	}
	if bin := os.Getenv("HLAB_BIN"); bin != "" {
		if filepath.IsAbs(bin) {
			return bin
		}
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(root, bin)
	}
	return Binary(t, "./cmd/hlab")
}

// builds holds each command's build, by package.
var builds struct {
	sync.Mutex
	m map[string]*build
}

type build struct {
	once sync.Once
	bin  string
	err  error
}

// Binary returns the path of the command in pkg (relative to the
// repository's root: "./cmd/databus"), built once per test process. The
// builds go to a directory of the process's own under the system's
// temporary directory; since a test process cannot remove it as it exits,
// each process removes those of processes that have ended.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	builds.Lock()
	if builds.m == nil {
		builds.m = map[string]*build{}
	}
	b := builds.m[pkg]
	if b == nil {
		b = &build{}
		builds.m[pkg] = b
	}
	builds.Unlock()
	b.once.Do(func() { b.bin, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

const buildPrefix = "hlab-testkit-"

var removeStale sync.Once

func goBuild(pkg string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	removeStale.Do(removeStaleBuilds)
	dir := filepath.Join(os.TempDir(), buildPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(out))
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

// Run runs bin with args and returns its stdout, its stderr and the
// error of the run (an *exec.ExitError when it exited non-zero).
func Run(bin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// RunOK runs bin with args, fails t unless it exits 0, and returns its
// stdout.
func RunOK(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := Run(bin, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), err, out, errOut)
	}
	return out
}
