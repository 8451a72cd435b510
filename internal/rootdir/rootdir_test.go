package rootdir

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// otherUser returns the uid and gid of nobody, a user other than root,
// or skips t.
func otherUser(t *testing.T) (int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand directories to another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

func TestMakeRefusesAnotherUsersPath(t *testing.T) {
	uid, gid := otherUser(t)
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, uid, gid); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{theirs, filepath.Join(theirs, "below", "cluster")} {
		if _, err := Make(dir, 0o711); !errors.Is(err, ErrUnsafe) {
			t.Errorf("Make(%s) under another user's directory: %v; want ErrUnsafe", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(theirs, "below")); err == nil {
		t.Error("Make made a directory below another user's before refusing")
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if _, err := Make(filepath.Join(open, "x"), 0o711); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Make under a world-writable, non-sticky directory: %v; want ErrUnsafe", err)
	}
	mine := filepath.Join(base, "mine", "cluster")
	got, err := Make(mine, 0o711)
	if err != nil || got != mine {
		t.Fatalf("Make(%s) = %s, %v", mine, got, err)
	}
	if fi, _ := os.Stat(mine); fi.Mode().Perm() != 0o711 {
		t.Errorf("mode %v; want 0711", fi.Mode().Perm())
	}
}

func TestCreateAndOpenRefuseLinks(t *testing.T) {
	uid, gid := otherUser(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "log")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if f, err := Create(link, os.O_APPEND, 0o600); !errors.Is(err, ErrUnsafe) {
		f.Close()
		t.Errorf("Create through a link: %v; want ErrUnsafe", err)
	}
	if f, err := Open(link); !errors.Is(err, ErrUnsafe) {
		f.Close()
		t.Errorf("Open through a link: %v; want ErrUnsafe", err)
	}
	theirs := filepath.Join(dir, "theirs")
	if err := os.WriteFile(theirs, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(theirs, uid, gid)
	if f, err := Open(theirs); !errors.Is(err, ErrUnsafe) {
		f.Close()
		t.Errorf("Open of another user's file: %v; want ErrUnsafe", err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Symlink(victim, data); err != nil {
		t.Fatal(err)
	}
	if err := ChownDir(data, uid, gid); !errors.Is(err, ErrUnsafe) {
		t.Errorf("ChownDir of a link: %v; want ErrUnsafe", err)
	}
	if fi, _ := os.Stat(victim); Owner(fi) != 0 {
		t.Errorf("the victim was chowned to %d through a link", Owner(fi))
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("the victim was written: %q", b)
	}
}
