// Package rootdir keeps the files root writes for another user's server
// out of that user's reach. Postgres runs as the postgres user, but hlab
// starts it as root: root makes its directories, writes its password file
// and opens its log. Done inside a directory the postgres user can write,
// each of those follows a symbolic link that user planted, and writes,
// truncates or chowns a file of its choosing as root. So root works only
// in directories that no other user can change (Make checks the whole
// path up to /), opens with O_NOFOLLOW (Open, Create), and hands the other
// user one directory of its own (Chown), never a file.
package rootdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is returned (wrapped) by Make and Check for a directory that a
// user other than root and this process's user could change.
var ErrUnsafe = errors.New("rootdir: another user could plant links here")

// Make makes dir and its missing parents, sets dir's mode to perm (the
// parents it makes get 0755), and checks it as Check does. It returns dir
// with symbolic links resolved: work from that path.
func Make(dir string, perm os.FileMode) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	// Check the deepest directory that exists before making anything
	// below it: MkdirAll through another user's link would make
	// directories where that user chose.
	var missing []string
	base := dir
	for {
		if _, err := os.Lstat(base); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		missing = append(missing, filepath.Base(base))
		if base == filepath.Dir(base) {
			break
		}
		base = filepath.Dir(base)
	}
	resolved, err := Check(base)
	if err != nil {
		return "", err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		resolved = filepath.Join(resolved, missing[i])
		mode := os.FileMode(0o755)
		if i == 0 {
			mode = perm
		}
		if err := os.Mkdir(resolved, mode); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	// Mkdir's mode is filtered by the umask; the directory is ours and
	// no one else can replace it (Check), so set the mode exactly.
	if err := os.Chmod(resolved, perm); err != nil {
		return "", err
	}
	return Check(resolved)
}

// Check returns dir with symbolic links resolved when no user other than
// root and this process's user can change what is found there: dir
// belongs to this process's user, and dir and every directory above it
// belong to root or to it and are writable by no one else (a sticky
// directory, /tmp, is allowed above dir: no one else can rename or
// remove what is ours in it). Otherwise the error wraps ErrUnsafe and
// names the directory and its owner.
func Check(dir string) (string, error) {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	me := os.Geteuid()
	for p := resolved; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		uid := Owner(fi)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return "", fmt.Errorf("%w: %s became a symbolic link", ErrUnsafe, p)
		case p == resolved && uid != me:
			return "", fmt.Errorf("%w: %s is owned by uid %d (%s), not by this process's user (uid %d): use a directory root owns, or remove it if an older hlab made it for that user", ErrUnsafe, p, uid, userName(uid), me)
		case uid != 0 && uid != me:
			return "", fmt.Errorf("%w: %s, above %s, is owned by uid %d (%s): use a directory under one root owns", ErrUnsafe, p, resolved, uid, userName(uid))
		case fi.Mode().Perm()&0o022 != 0 && (p == resolved || fi.Mode()&os.ModeSticky == 0):
			return "", fmt.Errorf("%w: %s is writable by other users (mode %v): chmod go-w it, or use another directory", ErrUnsafe, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return resolved, nil
		}
	}
}

// Owner returns the uid that owns fi (-1 when the platform does not say).
func Owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// Open opens the regular file path for reading without following a
// symbolic link, and checks that this process's user owns it and that no
// other user can write it.
func Open(path string) (*os.File, error) {
	return openChecked(path, os.O_RDONLY, 0)
}

// Create opens path for writing, creating it with perm if it does not
// exist, without following a symbolic link; flag adds to O_WRONLY|O_CREATE
// (os.O_APPEND, os.O_TRUNC, os.O_EXCL). An existing file must be a regular
// file this process's user owns, writable by no one else.
func Create(path string, flag int, perm os.FileMode) (*os.File, error) {
	return openChecked(path, os.O_WRONLY|os.O_CREATE|flag, perm)
}

func openChecked(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafe, path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%w: %s is not a regular file (%v)", ErrUnsafe, path, fi.Mode().Type())
	case Owner(fi) != os.Geteuid():
		err = fmt.Errorf("%w: %s is owned by uid %d (%s)", ErrUnsafe, path, Owner(fi), userName(Owner(fi)))
	case fi.Mode().Perm()&0o022 != 0:
		err = fmt.Errorf("%w: %s is writable by other users (mode %v)", ErrUnsafe, path, fi.Mode().Perm())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ChownDir makes dir (mode 0700), or finds it, as a directory of its own
// for uid:gid inside parent, a directory Make checked: the one thing root
// hands another user. It never follows a symbolic link: a dir that is one,
// or that a third user owns, is refused.
func ChownDir(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (%v)", ErrUnsafe, dir, fi.Mode().Type())
	}
	if o := Owner(fi); o != uid && o != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by uid %d (%s), not by uid %d", ErrUnsafe, dir, o, userName(o), uid)
	}
	// Lchown, like fchownat with AT_SYMLINK_NOFOLLOW, changes a link
	// itself, never its target; the Lstat above refused one anyway.
	return os.Lchown(dir, uid, gid)
}
