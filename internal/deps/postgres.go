package deps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/rootdir"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// ErrPostgresNotInstalled is returned by FindPostgres when no server binaries are found.
var ErrPostgresNotInstalled = errors.New("deps: the PostgreSQL server is not installed (install it with 'apt-get install -y postgresql', or run 'make deps')")

// FindPostgres returns the directory of the newest PostgreSQL server
// binaries (postgres, initdb) and the server's version (e.g. "15.18").
func FindPostgres() (binDir, version string, err error) { return findPostgres(0) }

// findPostgres returns the newest server of major (0: of any): Debian's
// (/usr/lib/postgresql/*/bin) or the one InstallPostgres14 unpacked.
func findPostgres(major int) (binDir, version string, err error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, filepath.Join(Postgres14Dir, "bin"))
	best := -1
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			continue
		}
		out, err := exec.Command(filepath.Join(d, "postgres"), "--version").Output()
		if err != nil {
			continue
		}
		// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
		v := "unknown"
		if m := regexp.MustCompile(`\) (\d+(?:\.\d+)*)`).FindSubmatch(out); m != nil {
			v = string(m[1])
		}
		n, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
		if (major == 0 || n == major) && n > best {
			best, binDir, version = n, d, v
		}
	}
	switch {
	case binDir != "":
		return binDir, version, nil
	case major == 14:
		return "", "", fmt.Errorf("%w: no PostgreSQL 14 here (install it with 'hlab deps install postgres14', or run 'make deps')", ErrPostgresNotInstalled)
	case major != 0:
		return "", "", fmt.Errorf("%w: no PostgreSQL %d here", ErrPostgresNotInstalled, major)
	}
	return "", "", ErrPostgresNotInstalled
}

// PostgresConfig is what StartPostgres needs; the zero value starts a
// throwaway, non-durable cluster for tests.
type PostgresConfig struct {
	// Dir holds the cluster (data/, the postgres user's) and what root
	// writes for it (postgres.log, password): "" = a temporary directory
	// that Stop removes. Dir must be this process's user's and no other
	// user may be able to change it or any directory above it
	// (rootdir.Make); StartPostgres makes it if missing, mode 0711 so that
	// the postgres user reaches data/ and nothing else.
	Dir string
	// Keep makes the cluster outlive its server (hlab deps up/down): a
	// cluster already in Dir is started as it is, with the password kept
	// beside it (Dir/password, readable by root only), instead of a new
	// one. Needs Dir. Stop never removes a given Dir.
	Keep bool
	// Port is the port to listen on; 0 = a free one.
	Port int
	// Major is the server's major version: 0 = the newest installed, 14 =
	// the Postgres 14 of InstallPostgres14 (report A3's line).
	Major int
	// Durable keeps fsync, synchronous_commit and full_page_writes on, as a
	// production server has them; experiments that compare databases set
	// it and record Settings. Off (the default) is for tests only.
	Durable bool
	// Settings are extra server settings (name -> value), applied last.
	Settings map[string]string
	CPU      float64 // sandbox CPU quota (fraction of a core); 0 = none
	MemoryMB int     // sandbox memory limit; 0 = none
	// StartTimeout bounds initdb plus the wait for the first connection (30s).
	StartTimeout time.Duration
}

// Postgres is a running PostgreSQL cluster on 127.0.0.1. The superuser is
// "postgres" with a random password (scram-sha-256, as the official
// docker image sets it up), on the loopback interface and a Unix socket in
// the data directory: another user of the machine cannot connect without
// it. DSN carries the password.
//
// The server runs as the postgres user, which owns Dir/data and nothing
// else: root writes its log and password in Dir, which only root can
// change, so that a link the postgres user plants never leads root to a
// file of that user's choosing (package rootdir).
type Postgres struct {
	Version string // "15.18"
	Kind    string // "postgres 15.18", for a run's environment record
	Addr    string // 127.0.0.1:port
	Dir     string
	// Password is the superuser's, generated for this cluster.
	Password string
	// Settings are the server settings that ran (durability among them),
	// for a run's environment record.
	Settings map[string]string

	sb  *sandbox.Sandbox
	cfg PostgresConfig
	// external is the URL of a server the lab did not start
	// (ConnectPostgres), prefix what the run's names start with there.
	external *url.URL
	prefix   string
	binDir   string
	tempDir  bool

	mu    sync.Mutex
	proc  *sandbox.Process
	roles map[string]string // database -> its role's password (CreateDatabase)
}

// StartPostgres initializes a cluster in cfg.Dir and starts it under sb as
// the postgres user (initdb and postgres refuse to run as root), with
// logical replication enabled (wal_level=logical) for change data capture.
func StartPostgres(ctx context.Context, sb *sandbox.Sandbox, cfg PostgresConfig) (*Postgres, error) {
	if sb == nil {
		return nil, errors.New("deps: StartPostgres needs a sandbox to run the server in")
	}
	binDir, version, err := findPostgres(cfg.Major)
	if err != nil {
		return nil, err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	p := &Postgres{Version: version, Kind: "postgres " + version, sb: sb, cfg: cfg, binDir: binDir}
	if cfg.Dir == "" {
		dir, err := ownedTempDir(postgresTempPrefix)
		if err != nil {
			return nil, fmt.Errorf("deps: postgres dir: %w", err)
		}
		cfg.Dir, p.tempDir = dir, true
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("deps: postgres password: %w", err)
	}
	p.Password = hex.EncodeToString(pw)
	if p.Dir, err = rootdir.Make(cfg.Dir, 0o711); err != nil {
		p.Dir = cfg.Dir
		p.removeTemp()
		return nil, fmt.Errorf("deps: postgres directory: %w", err)
	}
	if err := p.initOrReuse(ctx); err != nil {
		p.removeTemp()
		return nil, err
	}
	err = onPorts(ctx, cfg.Port, 1, func(ports []int) error {
		port := ports[0]
		p.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		p.Settings = map[string]string{
			"listen_addresses":        "127.0.0.1",
			"port":                    strconv.Itoa(port),
			"unix_socket_directories": p.dataDir(),
			"wal_level":               "logical",
			"max_replication_slots":   "16",
			"max_wal_senders":         "16",
			"max_connections":         "500",
			"fsync":                   "off",
			"synchronous_commit":      "off",
			"full_page_writes":        "off",
		}
		if cfg.Durable {
			p.Settings["fsync"], p.Settings["synchronous_commit"], p.Settings["full_page_writes"] = "on", "on", "on"
		}
		for k, v := range cfg.Settings {
			p.Settings[k] = v
		}
		return p.StartServer(ctx)
	})
	if err != nil {
		p.removeTemp()
		return nil, err
	}
	return p, nil
}

// postgresTempPrefix names the temporary directories of clusters.
const postgresTempPrefix = "hlab-postgres-"

// DSN returns a connection string for database db, with the password:
// the superuser's on a server the lab started (for the lab's own
// connections: seeding, faults, settings), the URL's own user on an
// external server. On an external server, db is the run's own database
// of that name (prefixed), and "" the URL's own. A service gets
// ServiceDSN instead.
func (p *Postgres) DSN(db string) string {
	if p.external != nil {
		return p.externalDSN(db)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", p.Password), Host: p.Addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// ServiceDSN returns the connection string a service gets for database db,
// which CreateDatabase made: on a server the lab started, that of the
// database's own role, which owns it and is no superuser (a superuser's
// password is a shell on the machine: COPY ... TO PROGRAM); on an
// external server, the URL's (give the lab a user that is no superuser).
func (p *Postgres) ServiceDSN(db string) string {
	if p.external != nil {
		return p.externalDSN(db)
	}
	p.mu.Lock()
	pw := p.roles[db]
	p.mu.Unlock()
	u := url.URL{Scheme: "postgres", User: url.UserPassword(db, pw), Host: p.Addr, Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// DatabaseOption adds to what CreateDatabase makes.
type DatabaseOption int

// Replication lets the database's role stream its changes (REPLICATION:
// replication slots, logical decoding), which a replica needs.
const Replication DatabaseOption = 1

// CreateDatabase creates database name (an error if it exists); on an
// external server its name starts with the run's prefix (DSN finds it).
// On a server the lab started it also creates a role of the same name,
// with a password of its own, which owns the database and is the only one
// besides the superuser that may connect to it (ServiceDSN): no
// superuser, no CREATEDB, no CREATEROLE, and REPLICATION only with that
// option.
func (p *Postgres) CreateDatabase(ctx context.Context, name string, opts ...DatabaseOption) error {
	admin, real := "postgres", name
	if p.external != nil {
		admin, real = "", p.prefix+name
	}
	conn, err := pgx.Connect(ctx, p.DSN(admin))
	if err != nil {
		return fmt.Errorf("deps: postgres: %w", err)
	}
	defer conn.Close(ctx)
	db := pgx.Identifier{real}.Sanitize()
	if p.external != nil {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			return fmt.Errorf("deps: create database %s: %w", name, err)
		}
		return nil
	}
	pwb := make([]byte, 16)
	if _, err := rand.Read(pwb); err != nil {
		return fmt.Errorf("deps: postgres role password: %w", err)
	}
	pw := hex.EncodeToString(pwb) // hex: safe inside the literal below
	repl := "NOREPLICATION"
	if slices.Contains(opts, Replication) {
		repl = "REPLICATION"
	}
	for _, q := range []string{
		"CREATE ROLE " + db + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE " + repl + " PASSWORD '" + pw + "'",
		"CREATE DATABASE " + db + " OWNER " + db,
		"REVOKE ALL ON DATABASE " + db + " FROM PUBLIC",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("deps: create database %s: %w", name, err)
		}
	}
	p.mu.Lock()
	if p.roles == nil {
		p.roles = map[string]string{}
	}
	p.roles[name] = pw
	p.mu.Unlock()
	return nil
}

// Proc is the server process (nil while stopped).
func (p *Postgres) Proc() *sandbox.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// StopServer stops the server (fast shutdown) and keeps its data, for
// tests of what a service does while its database is down.
func (p *Postgres) StopServer() error {
	if p.external != nil {
		return ErrExternal
	}
	p.mu.Lock()
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc == nil {
		return nil
	}
	return proc.Stop(15 * time.Second)
}

// StartServer starts the server on its data (after StopServer) and waits
// until it accepts connections.
func (p *Postgres) StartServer(ctx context.Context) error {
	if p.external != nil {
		return ErrExternal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		return nil
	}
	args := []string{"-D", p.dataDir()}
	keys := make([]string, 0, len(p.Settings))
	for k := range p.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+p.Settings[k])
	}
	// Root opens the log in Dir, which the postgres user cannot change,
	// and hands the server the descriptor.
	logPath := filepath.Join(p.Dir, "postgres.log")
	logf, err := rootdir.Create(logPath, os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("deps: postgres log: %w", err)
	}
	defer logf.Close()
	proc, err := p.sb.Start(ctx, sandbox.Spec{
		Name: "postgres", Path: filepath.Join(p.binDir, "postgres"), Args: args,
		Dir: p.dataDir(), User: "postgres", StopSignal: syscall.SIGINT,
		CPU: p.cfg.CPU, MemoryMB: p.cfg.MemoryMB,
		Stdout: logf, Stderr: logf,
	})
	if err != nil {
		return fmt.Errorf("deps: start postgres: %w", err)
	}
	if err := awaitPostgres(ctx, p.DSN("postgres"), p.cfg.StartTimeout, proc.Done()); err != nil {
		proc.Stop(5 * time.Second)
		return fmt.Errorf("%w; %s", err, tail(logPath))
	}
	p.proc = proc
	return nil
}

// Stop stops the server and, for a temporary cluster, removes its files.
// An external server goes on running: Stop drops what the run made there
// (the databases and replication slots named with its prefix).
func (p *Postgres) Stop() error {
	if p.external != nil {
		return p.cleanup()
	}
	err := p.StopServer()
	p.removeTemp()
	return err
}

func (p *Postgres) removeTemp() {
	if p.tempDir {
		os.RemoveAll(p.Dir)
	}
}

// dataDir is the cluster's data directory, the postgres user's.
func (p *Postgres) dataDir() string { return filepath.Join(p.Dir, "data") }

// initOrReuse creates the cluster, or with Keep finds the one already in
// Dir and its password.
func (p *Postgres) initOrReuse(ctx context.Context) error {
	pwPath := filepath.Join(p.Dir, "password")
	if p.cfg.Keep && fileExists(filepath.Join(p.dataDir(), "PG_VERSION")) {
		f, err := rootdir.Open(pwPath)
		if err != nil {
			return fmt.Errorf("deps: postgres: a cluster is in %s but its password is not (%w): remove the directory to start afresh", p.Dir, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 1024))
		if err != nil {
			return fmt.Errorf("deps: postgres password: %w", err)
		}
		p.Password = strings.TrimSpace(string(b))
		return nil
	}
	if err := p.initdb(ctx); err != nil {
		return err
	}
	if p.cfg.Keep {
		if err := writeRootFile(pwPath, p.Password+"\n", -1, -1); err != nil {
			return fmt.Errorf("deps: postgres password: %w", err)
		}
	}
	return nil
}

// writeRootFile writes a new file at path (mode 0600; one left there is
// replaced), never through a link, and gives it to uid:gid unless they
// are -1.
func writeRootFile(path, content string, uid, gid int) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := rootdir.Create(path, os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil && uid >= 0 {
		err = f.Chown(uid, gid) // fchown: the file just made, not a path
	}
	return errors.Join(err, f.Close())
}

// initdb creates the cluster as the postgres user, in a data directory
// of its own inside Dir.
func (p *Postgres) initdb(ctx context.Context) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("deps: no postgres user (it comes with the postgresql package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := rootdir.ChownDir(p.dataDir(), uid, gid); err != nil {
		return fmt.Errorf("deps: postgres data directory: %w", err)
	}
	// The password goes to initdb in a file only the postgres user reads,
	// in Dir (it cannot list Dir or write there), removed once the
	// cluster exists.
	pwfile := filepath.Join(p.Dir, "pwfile")
	if err := writeRootFile(pwfile, p.Password+"\n", uid, gid); err != nil {
		return fmt.Errorf("deps: postgres password file: %w", err)
	}
	defer os.Remove(pwfile)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, "initdb"),
		"-D", p.dataDir(), "-U", "postgres", "--auth=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = p.dataDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("deps: initdb in %s: %w: %s", p.Dir, err, lastBytes(out, 400))
	}
	return nil
}

// awaitPostgres connects to dsn and pings until the server answers (the
// errors name it without the DSN, which carries the password).
func awaitPostgres(ctx context.Context, dsn string, timeout time.Duration, exited <-chan struct{}) error {
	return awaitReady(ctx, "postgres", "did not accept a connection", timeout, 50*time.Millisecond, exited, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	})
}

// lastBytes returns the end of a command's output for an error message.
func lastBytes(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.TrimSpace(string(out))
}
