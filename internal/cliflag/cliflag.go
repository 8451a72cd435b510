// Package cliflag holds what the services' command-line flags share: flag
// values that read back the field they set, and Args, which turns a Config
// back into the command line that reproduces it.
//
// Every service's Config has RegisterFlags(fs), binding each flag to one
// of its fields, and Args(), so that the lab starts a service from a typed
// Config rather than from strings that drift from the flags.
package cliflag

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
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
func Args[C any, P interface {
	*C
	Registerer
}](c C) []string {
	var bound C
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	P(&bound).RegisterFlags(fs)
	zero := map[string]string{}
	bound = *new(C)
	fs.VisitAll(func(f *flag.Flag) { zero[f.Name] = f.Value.String() })
	bound = c
	var args []string
	fs.VisitAll(func(f *flag.Flag) {
		if v := f.Value.String(); v != f.DefValue && v != zero[f.Name] {
			args = append(args, "--"+f.Name+"="+v)
		}
	})
	return args
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
