package depsctl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// postgresDir returns where the cluster of the state directory dir lives.
// Postgres runs as the postgres user, which must reach its directory; a
// state directory under root's home (/root is 0700) or a private
// temporary directory is out of its reach. The cluster then lives under
// the postgres user's home (/var/lib/postgresql/hlab/NAME-HASH), and
// dir/data is a symbolic link to it, which Down --purge follows.
func postgresDir(dir string) (string, error) {
	link := filepath.Join(dir, dataDir)
	if target, err := os.Readlink(link); err == nil {
		return target, nil // chosen at an earlier up
	}
	if _, err := os.Stat(link); err == nil {
		return link, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil || reachable(dir, u) {
		return link, nil // without the user, deps says what to install
	}
	sum := sha256.Sum256([]byte(dir))
	target := filepath.Join(u.HomeDir, "hlab", filepath.Base(dir)+"-"+hex.EncodeToString(sum[:4]))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", fmt.Errorf("depsctl: the postgres user cannot reach %s, and its home cannot hold the cluster instead: %w (use a --state-dir it can reach)", dir, err)
	}
	if err := os.Symlink(target, link); err != nil {
		return "", fmt.Errorf("depsctl: %w", err)
	}
	return target, nil
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
