package cliflag_test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/cliflag"
)

type mode string

type config struct {
	Mode      mode
	Brokers   []string
	Conns     int32
	Timeout   time.Duration
	Name      string
	NoIndexes bool
}

func (c *config) RegisterFlags(fs *flag.FlagSet) {
	c.Mode = "sync"
	fs.Var(cliflag.Text(&c.Mode), "mode", "sync or async (default sync)")
	fs.Var(cliflag.List(&c.Brokers), "brokers", "host:port,...")
	fs.Var(cliflag.AtLeast(&c.Conns, 1), "conns", "connections (default 4)")
	fs.DurationVar(&c.Timeout, "timeout", time.Second, "timeout")
	fs.StringVar(&c.Name, "name", "x", "name")
	fs.Var(cliflag.Not(&c.NoIndexes), "indexes", "use indexes")
}

func parse(t *testing.T, args []string) config {
	t.Helper()
	var c config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return c
}

// Args gives back a command line that parses to the same Config, and
// lists only what differs from the defaults.
func TestArgsRoundTrip(t *testing.T) {
	c := config{Mode: "async", Brokers: []string{"a:1", "b:2"}, Conns: 7, Timeout: 3 * time.Second, NoIndexes: true}
	args := cliflag.Args(c)
	want := []string{"--mode=async", "--brokers=a:1,b:2", "--conns=7", "--timeout=3s", "--indexes=false"}
	slices.Sort(want)
	if !slices.Equal(args, want) {
		t.Fatalf("Args = %q, want %q", args, want)
	}
	got := parse(t, args)
	got.Name = "" // the flag's default, as a zero field means
	if !slices.Equal(got.Brokers, c.Brokers) || got.Mode != c.Mode || got.Conns != c.Conns || got.Timeout != c.Timeout || got.NoIndexes != c.NoIndexes {
		t.Errorf("parsed %+v, want %+v", got, c)
	}
	if a := cliflag.Args(config{}); len(a) != 0 {
		t.Errorf("Args of a zero Config = %q, want none (zero means the default)", a)
	}
	if a := cliflag.Args(config{Name: "x", Timeout: time.Second}); len(a) != 0 {
		t.Errorf("Args of the defaults = %q, want none", a)
	}
}

func TestValuesRefuseBadInput(t *testing.T) {
	var c config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	for _, args := range [][]string{{"--conns", "0"}, {"--conns", "x"}, {"--conns", "99999999999"}, {"--indexes=maybe"}} {
		if err := fs.Parse(args); err == nil {
			t.Errorf("parse %q: no error", args)
		}
	}
	if c := parse(t, []string{"--brokers", " a:1, ,b:2", "--brokers", "c:3", "--indexes=false"}); !slices.Equal(c.Brokers, []string{"a:1", "b:2", "c:3"}) || !c.NoIndexes {
		t.Errorf("brokers %q, NoIndexes %v", c.Brokers, c.NoIndexes)
	}
	if c := parse(t, []string{"--indexes"}); c.NoIndexes {
		t.Error("--indexes alone switched indexes off")
	}
}

// Help shows the default of a switch that is on by default, and no
// "(default 0)" for a count whose zero means the documented default.
func TestHelpShowsDefaults(t *testing.T) {
	var c config
	var out strings.Builder
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&out)
	c.RegisterFlags(fs)
	fs.PrintDefaults()
	if !strings.Contains(out.String(), "(default true)") || strings.Contains(out.String(), "(default 0)") || strings.Contains(out.String(), "panic") {
		t.Errorf("help:\n%s", out.String())
	}
}

type withSecret struct {
	DSN  string
	Name string
}

func (c *withSecret) RegisterFlags(fs *flag.FlagSet) {
	cliflag.SecretVar(fs, &c.DSN, "dsn", "TEST_CLIFLAG_DSN", "database")
	fs.StringVar(&c.Name, "name", "", "name")
}

// A secret reaches a child through its environment, never its command
// line: Command splits it out, Args refuses it, and the child takes it
// from the variable, a file, or (visible to all) the flag.
func TestSecretNeverInArgs(t *testing.T) {
	const dsn = "postgres://u:s3cret@h/db"
	cmd := cliflag.CommandOf(withSecret{DSN: dsn, Name: "x"})
	if strings.Contains(strings.Join(cmd.Args, " "), "s3cret") || !slices.Equal(cmd.Args, []string{"--name=x"}) {
		t.Errorf("Args %q: want --name=x alone", cmd.Args)
	}
	if !slices.Equal(cmd.Env, []string{"TEST_CLIFLAG_DSN=" + dsn}) {
		t.Errorf("Env %q: want the DSN in TEST_CLIFLAG_DSN", cmd.Env)
	}
	if cmd := cliflag.CommandOf(withSecret{}); !slices.Equal(cmd.Env, []string{"TEST_CLIFLAG_DSN="}) {
		t.Errorf("Env %q of an unset secret: want it set empty, so the child inherits none", cmd.Env)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || strings.Contains(fmt.Sprint(r), "s3cret") {
				t.Errorf("Args of a Config with a secret: recovered %v; want a panic that does not show it", r)
			}
		}()
		cliflag.Args(withSecret{DSN: dsn})
	}()

	parse := func(args ...string) (withSecret, error) {
		var c withSecret
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		return c, fs.Parse(args)
	}
	t.Setenv("TEST_CLIFLAG_DSN", "from-env")
	if c, err := parse(); err != nil || c.DSN != "from-env" {
		t.Errorf("from the environment: %q, %v", c.DSN, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "dsn")
	os.WriteFile(file, []byte(dsn+"\n"), 0o600)
	if c, err := parse("--dsn-file", file); err != nil || c.DSN != dsn {
		t.Errorf("--dsn-file: %q, %v", c.DSN, err)
	}
	if c, err := parse("--dsn", "from-flag"); err != nil || c.DSN != "from-flag" {
		t.Errorf("--dsn: %q, %v", c.DSN, err)
	}
	os.Chmod(file, 0o644)
	if _, err := parse("--dsn-file", file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("--dsn-file readable by everyone: %v; want a refusal saying chmod 600", err)
	}
	var usage strings.Builder
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&usage)
	(&withSecret{}).RegisterFlags(fs)
	fs.PrintDefaults()
	if strings.Contains(usage.String(), "from-env") || !strings.Contains(usage.String(), "visible to every local user") {
		t.Errorf("usage %q: want no value shown, and the warning", usage.String())
	}
}

type withGrace struct{ Grace time.Duration }

func (c *withGrace) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(cliflag.DurationOrOff(&c.Grace, 5*time.Second), "grace", "grace")
}

// DurationOrOff: a zero field is the default, "0" is off (a negative
// field), and Args reproduces each; help shows the default.
func TestDurationOrOff(t *testing.T) {
	parse := func(args ...string) (withGrace, error) {
		var c withGrace
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		return c, fs.Parse(args)
	}
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{{nil, 0}, {[]string{"--grace=0"}, -1}, {[]string{"--grace=2s"}, 2 * time.Second}} {
		c, err := parse(tt.args...)
		if err != nil || c.Grace != tt.want {
			t.Fatalf("parse %q: %v, %v; want %v", tt.args, c.Grace, err, tt.want)
		}
		back, err := parse(cliflag.Args(c)...)
		if err != nil || back.Grace != c.Grace {
			t.Errorf("Args(%v) = %q parses to %v, %v", c.Grace, cliflag.Args(c), back.Grace, err)
		}
	}
	for _, bad := range []string{"-1s", "soon"} {
		if _, err := parse("--grace=" + bad); err == nil {
			t.Errorf("--grace=%s: no error", bad)
		}
	}
	var out strings.Builder
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&out)
	new(withGrace).RegisterFlags(fs)
	fs.PrintDefaults()
	if !strings.Contains(out.String(), "(default 5s)") {
		t.Errorf("help:\n%s", out.String())
	}
}
