// Package cli is hlab's command line: one FlagSet per subcommand and a map
// dispatch, as vegeta does. Commands take their streams in a State so they
// can be tested, and return an exit code: 0 success, 1 failure, 2 bad usage.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/highload-lab/hlab/internal/checker"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=...".
var Version = "dev"

// State holds what a command reads and writes besides its arguments.
type State struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Std returns the process's own streams and environment.
func Std() *State { return &State{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv} }

type command struct {
	summary string
	run     func(args []string, st *State) int
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"lab":   {"run the reports' experiments on this machine and compare with the reports", runLab},
		"load":  {"send HTTP load to a URL (closed or open model) and report latency percentiles", runLoad},
		"serve": {"run one service in the foreground (what the lab starts in its sandbox)", runServe},
		"deps":  {"check, install and start real dependencies (nginx, wrk, ...)", runDeps},
		// The lab runs the checker's direct producer as a process of its
		// own, under a quota, from the hlab binary it already has.
		"databus-checker": {"drive a databus gateway, or Kafka directly (--direct), and verify delivery (as cmd/databus-checker)", func(args []string, st *State) int { return checker.Main(args, st.Stdout, st.Stderr) }},
		"version":         {"print the version", func(_ []string, st *State) int { fmt.Fprintln(st.Stdout, "hlab", Version); return 0 }},
	}
}

// Main runs the hlab command line and returns the exit code.
func Main(args []string, st *State) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(st.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(st.Stderr, "hlab: unknown command %q\n", args[0])
		usage(st.Stderr)
		return 2
	}
	return cmd.run(args[1:], st)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `hlab: Highload Lab reproduces published high-load patterns on your machine.

Usage: hlab COMMAND [flags] [args]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Start with:  hlab lab --quick        (every experiment, about 90 s each)
             hlab lab scale          (one experiment)
             hlab load --connections 10 --duration 10s http://127.0.0.1:8080/
Run "hlab COMMAND --help" for a command's flags.
`)
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments ("hlab lab scale --quick"), which flag.Parse alone
// does not allow.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFlagSet returns a FlagSet that prints its usage to st.Stderr with a
// synopsis and a teaching paragraph.
func newFlagSet(st *State, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(st.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(st.Stderr, "Usage: %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
	}
	return fs
}

// parseError returns the exit code for a flag parse error: 0 for -help.
func parseError(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// fail prints a one-line error for cmd and returns code.
func fail(st *State, cmd string, code int, err error) int {
	fmt.Fprintf(st.Stderr, "hlab %s: %v\n", cmd, err)
	return code
}
