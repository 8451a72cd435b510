package deps

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// AptInstall installs Debian packages whose binaries are missing, with
// apt-get (it needs root). Progress goes to w.
func AptInstall(w io.Writer, pkgs ...string) error {
	var missing []string
	for _, p := range pkgs {
		if _, err := exec.LookPath(p); err != nil {
			if _, err := os.Stat("/usr/sbin/" + p); err != nil {
				missing = append(missing, p)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("deps: %v missing and no apt-get here: install them with your package manager", missing)
	}
	if os.Geteuid() != 0 {
		return errors.New("deps: installing packages needs root: run 'sudo hlab deps install' or 'sudo make deps'")
	}
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("deps: apt-get %v: %w", args, err)
		}
	}
	return nil
}
