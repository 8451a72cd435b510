// Package cliflag holds what the services' command-line flags share: flag
// values that read back the field they set, and Args, which turns a Config
// back into the command line that reproduces it.
//
// Every service's Config has RegisterFlags(fs), binding each flag to one
// of its fields, and Args() (or Command(), when it holds a secret), so
// that the lab starts a service from a typed Config rather than from
// strings that drift from the flags.
//
// A secret (a DSN with a password, a webhook URL with a token) never goes
// to a command line, which every local user reads (ps, /proc/PID/cmdline,
// a profile's /debug/pprof/cmdline): SecretVar binds it to a flag, a file
// flag and an environment variable, Args refuses it, and Command puts it
// in the child's environment, which only its own user and root can read.
package cliflag

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/secretfile"
)

// Registerer is a Config that binds its flags to its own fields.
type Registerer interface{ RegisterFlags(fs *flag.FlagSet) }

// Args returns the flags, as --name=value, that make a service parse c:
// each flag whose field in c is neither the flag's default nor its Go zero
// value. A zero field means "the default", as in every setDefaults, so a
// Config written in code lists only what it changes.
//
// It works for flags whose Value reads back its field (the flag package's
// XxxVar and TextVar, and this package's values), not for fs.Func.
//
// Args panics when a secret field (SecretVar) is set, as the flag package
// panics on a flag defined twice: the caller must use Command.
func Args[C any, P interface {
	*C
	Registerer
}](c C) []string {
	cmd := CommandOf[C, P](c)
	for _, kv := range cmd.Env {
		if name, v, _ := strings.Cut(kv, "="); v != "" {
			panic("cliflag: $" + name + " holds a secret, which a command line would show to every local user: build the command with Command, whose Env carries it")
		}
	}
	return cmd.Args
}

// Command is a command line split in two: Args, the flags (anyone on the
// machine can read them), and Env, NAME=value for each secret, the
// child's environment (only its user and root can read /proc/PID/environ).
type Command struct {
	Args []string
	Env  []string
}

// CommandOf returns the command that makes a service parse c: Args as
// Args returns them, without the secrets; Env sets each secret's
// variable, to "" for one c leaves unset, so that the child never
// inherits one meant for another.
func CommandOf[C any, P interface {
	*C
	Registerer
}](c C) Command {
	var bound C
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	P(&bound).RegisterFlags(fs)
	zero := map[string]string{}
	bound = *new(C)
	fs.VisitAll(func(f *flag.Flag) { zero[f.Name] = f.Value.String() })
	bound = c
	var cmd Command
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(type) {
		case secret:
			cmd.Env = append(cmd.Env, v.env+"="+*v.p)
			return
		case secretFile:
			return // reads into its secret's field; never a value of its own
		}
		if v := f.Value.String(); v != f.DefValue && v != zero[f.Name] {
			cmd.Args = append(cmd.Args, "--"+f.Name+"="+v)
		}
	})
	return cmd
}

// SecretVar binds a secret field to three sources, the first given wins:
// --NAME VALUE (which ps shows to every local user while the process
// runs: for trying things out), --NAME-file PATH (a file that other users
// cannot read: secretfile.Read), and the environment variable env, read
// now as the default. Args refuses the field; Command puts it in env.
// usage says what the secret is; SecretVar adds where it may come from.
func SecretVar(fs *flag.FlagSet, p *string, name, env, usage string) {
	if *p == "" {
		*p = os.Getenv(env)
	}
	fs.Var(secret{p, env}, name, usage+" (visible to every local user in ps: prefer --"+name+"-file or $"+env+")")
	fs.Var(secretFile{p}, name+"-file", "read --"+name+" from this file, which other users must not be able to read (default $"+env+")")
}

// secret is a SecretVar's value flag. It never reads back its value, so
// that no usage text, error or default shows it.
type secret struct {
	p   *string
	env string
}

func (s secret) String() string { return "" }

func (s secret) Set(v string) error { *s.p = v; return nil }

// secretFile is a SecretVar's --NAME-file flag.
type secretFile struct{ p *string }

func (s secretFile) String() string { return "" }

func (s secretFile) Set(path string) error {
	v, err := secretfile.Read(path)
	if err != nil {
		return err
	}
	if v == "" {
		return fmt.Errorf("%s is empty", path)
	}
	*s.p = v
	return nil
}

// List is a comma-separated list flag: each use appends its items, spaces
// trimmed and empty items dropped ("--brokers a:1,b:2").
func List(p *[]string) flag.Value { return list{p} }

type list struct{ p *[]string }

func (l list) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l list) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l.p = append(*l.p, s)
		}
	}
	return nil
}

// Text is a flag for a string type whose values are checked later (a
// mode, a policy): it sets and reads back the field as is.
func Text[T ~string](p *T) flag.Value { return text[T]{p} }

type text[T ~string] struct{ p *T }

func (t text[T]) String() string {
	if t.p == nil {
		return ""
	}
	return string(*t.p)
}

func (t text[T]) Set(v string) error { *t.p = T(v); return nil }

// AtLeast is an integer flag that refuses values below min; a zero field
// reads back as "0" (the default, in a Config).
func AtLeast[T ~int32 | ~int](p *T, min T) flag.Value { return atLeast[T]{p, min} }

type atLeast[T ~int32 | ~int] struct {
	p   *T
	min T
}

func (a atLeast[T]) String() string {
	if a.p == nil { // the flag package's zero probe: as an unset field reads
		return "0"
	}
	return strconv.FormatInt(int64(*a.p), 10)
}

func (a atLeast[T]) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < int64(a.min) || int64(T(n)) != n {
		return fmt.Errorf("give a whole number of at least %d", a.min)
	}
	*a.p = T(n)
	return nil
}

// Not is a boolean flag that sets the negation of *p: a switch that is on
// by default ("--indexes=false") over a Config field whose zero value
// keeps it on (NoIndexes).
func Not(p *bool) flag.Value { return not{p} }

type not struct{ p *bool }

func (n not) IsBoolFlag() bool { return true }

func (n not) String() string {
	if n.p == nil { // the flag package's zero probe: "false" so that help shows "(default true)"
		return "false"
	}
	return strconv.FormatBool(!*n.p)
}

func (n not) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("give true or false")
	}
	*n.p = !b
	return nil
}

// DurationOrOff is a duration flag over a Config field whose zero value
// means the default def and whose negative value means off: "0" on the
// command line turns the thing off (stored as -1ns), a positive duration
// sets it. It reads back as def when the field is zero and as "0s" when
// off, so Args reproduces either.
func DurationOrOff(p *time.Duration, def time.Duration) flag.Value {
	return durationOrOff{p, def}
}

type durationOrOff struct {
	p   *time.Duration
	def time.Duration
}

func (d durationOrOff) String() string {
	switch {
	case d.p == nil: // the flag package's zero probe: unlike def, so help shows it
		return "0s"
	case *d.p == 0:
		return d.def.String()
	case *d.p < 0:
		return "0s"
	}
	return d.p.String()
}

func (d durationOrOff) Set(v string) error {
	n, err := time.ParseDuration(v)
	if err != nil || n < 0 {
		return fmt.Errorf("give a duration such as %v, or 0 for off", d.def)
	}
	if n == 0 {
		n = -1
	}
	*d.p = n
	return nil
}
