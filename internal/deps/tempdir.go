package deps

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/highload-lab/hlab/internal/rootdir"
)

// ownerFile marks a temporary directory with the pid of the process that
// made it, so that a later run can tell a dead owner's leftovers from a
// live one's.
const ownerFile = "owner.pid"

// ownedTempDir sweeps the leftovers of dead owners under prefix, then
// makes a new temporary directory marked as this process's: a server
// killed with its owner (SIGKILL, a test's timeout) is killed by the
// sandbox, but its files would otherwise stay in the temp directory.
func ownedTempDir(prefix string) (string, error) {
	sweepTempDirs(prefix)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// sweepTempDirs removes the directories under prefix whose owner is dead.
// A directory without an owner file is not ours to judge, nor is one
// another user made (the temporary directory is everyone's: it could be
// a link, or hold links, planted for root to follow).
func sweepTempDirs(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || rootdir.Owner(fi) != os.Geteuid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		os.RemoveAll(d)
	}
}
