package depsctl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/highload-lab/hlab/internal/rootdir"
)

// clusterRoot holds the clusters of state directories the postgres user
// cannot reach. Root owns it and everything above it, so that the postgres
// user, which owns only each cluster's data directory, cannot plant a
// link where root writes (the log, the password); its own home, where an
// older hlab put them, is the one place it could.
var clusterRoot = "/var/lib/hlab/postgres"

// postgresDir returns where the cluster of the state directory dir lives.
// Postgres runs as the postgres user, which must reach its data directory;
// a state directory under root's home (/root is 0700) or a private
// temporary directory is out of its reach. The cluster then lives under
// clusterRoot (NAME-HASH), and dir/data is a symbolic link to it, which
// Down --purge follows.
func postgresDir(dir string) (string, error) {
	link := filepath.Join(dir, dataDir)
	if target, err := os.Readlink(link); err == nil {
		return target, checkCluster(target) // chosen at an earlier up
	}
	if _, err := os.Stat(link); err == nil {
		return link, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil || reachable(dir, u) {
		return link, nil // without the user, deps says what to install
	}
	sum := sha256.Sum256([]byte(dir))
	target := filepath.Join(clusterRoot, filepath.Base(dir)+"-"+hex.EncodeToString(sum[:4]))
	if _, err := rootdir.Make(clusterRoot, 0o755); err != nil {
		return "", fmt.Errorf("depsctl: the postgres user cannot reach %s, and %s cannot hold the cluster instead: %w (use a --state-dir it can reach)", dir, clusterRoot, err)
	}
	if err := os.Symlink(target, link); err != nil {
		return "", fmt.Errorf("depsctl: %w", err)
	}
	return target, nil
}

// checkCluster refuses a cluster directory that another user could change
// (an older hlab put it in the postgres user's home): root must not
// start it, nor remove it, there.
func checkCluster(target string) error {
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		return nil // made on up, under a directory checked then
	}
	if _, err := rootdir.Check(target); err != nil {
		return fmt.Errorf("depsctl: the cluster is in %s, where another user could plant links for root to follow (an older hlab put it in the postgres user's home): %w; "+
			"remove it as that user (runuser -u postgres -- rm -rf %s) or move it under %s, root's, and point the link %s in the state directory at it",
			target, err, target, clusterRoot, dataDir)
	}
	return nil
}

// reachable reports whether user u can search every directory from / to
// dir, as Postgres must to open its data directory.
func reachable(dir string, u *user.User) bool {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		m := fi.Mode().Perm()
		switch {
		case !ok:
			return false
		case int(st.Uid) == uid:
			if m&0o100 == 0 {
				return false
			}
		case int(st.Gid) == gid:
			if m&0o010 == 0 {
				return false
			}
		case m&0o001 == 0:
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}
