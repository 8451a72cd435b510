// Package secretfile reads secrets (a token, a password, a URL that
// carries one) from files, refusing a file other users could read or
// change: a secret in a world-readable file is every local user's, and
// one in a file another user can write is theirs to replace.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrExposed is returned (wrapped) by Read and Check for a file that users
// other than its owner and group may read, or that anyone but its owner
// may write.
var ErrExposed = errors.New("secretfile: other users can read or change this file")

// MaxBytes bounds what Read reads: a secret is short.
const MaxBytes = 64 << 10

// Open opens path for reading after checking, on the file opened, what
// Check checks.
func Open(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat() // the file opened, not one swapped in after a check
	if err == nil {
		err = check(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Read returns the contents of path, surrounding space and newlines
// trimmed, after Check.
func Read(path string) (string, error) {
	f, err := Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxBytes {
		return "", fmt.Errorf("secretfile: %s is over %d bytes: a secret file holds the secret alone", path, MaxBytes)
	}
	return strings.TrimSpace(string(b)), nil
}

// Check refuses path when users other than its owner and group may read
// or write it (mode o+rw), or its group may write it (g+w). A group may
// read: that is how a service user is given a file an operator owns (and
// how Kubernetes mounts a secret with fsGroup).
func Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return check(path, fi)
}

func check(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("secretfile: %s is not a regular file", path)
	}
	if m := fi.Mode().Perm(); m&0o026 != 0 {
		return fmt.Errorf("%w: %s has mode %v: chmod 600 %s (or 640 for a group that runs the service; in Kubernetes, defaultMode: 0440 with fsGroup)", ErrExposed, path, m, path)
	}
	return nil
}
