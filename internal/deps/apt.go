package deps

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
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
	return aptGet(context.Background(), w, missing, "packages", "sudo hlab deps install")
}

// aptTool is a program a dependency needs and the Debian package that
// has it.
type aptTool struct{ bin, pkg string }

// javaTools are what the JVM dependencies (Cassandra, the real Kafka
// broker) need: Java 17, and Maven, which fetches their jars.
var javaTools = []aptTool{{"java", "openjdk-17-jre-headless"}, {"mvn", "maven"}}

// installTools installs the packages of the tools that are missing with
// apt-get (it needs root). what names the tools in errors ("Java and
// Maven"), dep is the argument of 'hlab deps install'. Progress goes to w.
func installTools(ctx context.Context, w io.Writer, dep, what string, tools []aptTool) error {
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t.bin); err != nil {
			missing = append(missing, t.pkg)
		}
	}
	return aptGet(ctx, w, missing, what, "sudo hlab deps install "+dep)
}

// aptGet installs pkgs with apt-get; what and sudo (the command to run as
// root) are for the error when this process is not root.
func aptGet(ctx context.Context, w io.Writer, pkgs []string, what, sudo string) error {
	if len(pkgs) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("deps: %v missing and no apt-get here: install them with your package manager", pkgs)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("deps: installing %s needs root: run '%s' or 'sudo make deps'", what, sudo)
	}
	fmt.Fprintf(w, "deps: installing %s from Debian's packages\n", strings.Join(pkgs, " "))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("deps: apt-get %v: %w", args, err)
		}
	}
	return nil
}

// fetchJarsSaying fetches the jars of what ("kafka 4.1.0") with fetch,
// telling w before and where they went after.
func fetchJarsSaying(w io.Writer, what string, fetch func() (string, error)) error {
	fmt.Fprintf(w, "deps: fetching the %s jars from Maven Central\n", what)
	lib, err := fetch()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "deps: %s jars in %s (%.0f MB)\n", what, lib, float64(dirSize(lib))/(1<<20))
	return nil
}
