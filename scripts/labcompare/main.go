// Command labcompare checks that two `hlab lab --json` files describe the
// same lab: the same experiments, the same rows, the same claims (text,
// metric, rows, threshold), the same targets and the same figures not
// rerun. A file from before targets existed lists its checks instead,
// which show as lines the other file lacks.
// It ignores every measured number, verdict and note: a refactoring that
// should change nothing the lab does passes it with results from two
// different runs.
//
//	go run ./scripts/labcompare before.json after.json
//
// It prints what one file has and the other lacks, and exits 1 if
// anything differs, 2 if a file cannot be read. It reads the files as
// hlab does (labresult.ReadJSONFile); to compare the figures and verdicts of
// two runs, use hlab lab compare.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/highload-lab/hlab/internal/labresult"
)

// shape lists, as lines, what the lab did in a file: one line per
// experiment, row, claim, target (or check, in older files) and figure
// not rerun.
func shape(d labresult.Document, checks map[string][]string) []string {
	var out []string
	for _, e := range d.Experiments {
		out = append(out, fmt.Sprintf("experiment %s (%s)", e.Name, e.Mode))
		for _, r := range e.Rows {
			out = append(out, fmt.Sprintf("%s: row %q", e.Name, r.Label))
		}
		for _, c := range e.Claims {
			out = append(out, fmt.Sprintf("%s: claim %q: %s of %q / %q, %s", e.Name, c.Claim, c.Metric, c.Numerator, c.Denominator, c.Threshold))
		}
		for _, t := range e.Targets {
			out = append(out, fmt.Sprintf("%s: target %q: %s %s", e.Name, t.Target, t.Metric, t.Bound))
		}
		for _, c := range checks[e.Name] {
			out = append(out, fmt.Sprintf("%s: check %q", e.Name, c))
		}
		for _, n := range e.NotRerun {
			out = append(out, fmt.Sprintf("%s: not rerun %q", e.Name, n.Figure))
		}
	}
	return out
}

// diff returns the lines of a missing from b, and of b missing from a,
// each counted (a row label may repeat).
func diff(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, l := range a {
		count[l]++
	}
	for _, l := range b {
		count[l]--
	}
	for _, l := range a {
		if count[l] > 0 {
			onlyA = append(onlyA, l)
			count[l]--
		}
	}
	for l, n := range count {
		for ; n < 0; n++ {
			onlyB = append(onlyB, l)
		}
	}
	slices.Sort(onlyB)
	return onlyA, onlyB
}

// oldChecks reads the checks of a file written before targets replaced
// them: by experiment, their texts.
func oldChecks(path string) (map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Experiments []struct {
			Name   string
			Checks []struct {
				Check string
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range doc.Experiments {
		for _, c := range e.Checks {
			out[e.Name] = append(out[e.Name], c.Check)
		}
	}
	return out, nil
}

func run(args []string, w io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(w, "usage: labcompare BEFORE.json AFTER.json (both written by hlab lab --json)")
		return 2
	}
	before, err := labresult.ReadJSONFile(args[0])
	if err != nil {
		fmt.Fprintln(w, "labcompare:", err)
		return 2
	}
	after, err := labresult.ReadJSONFile(args[1])
	if err != nil {
		fmt.Fprintln(w, "labcompare:", err)
		return 2
	}
	var checks [2]map[string][]string
	for i, path := range args {
		if checks[i], err = oldChecks(path); err != nil {
			fmt.Fprintln(w, "labcompare:", err)
			return 2
		}
	}
	a, b := shape(before, checks[0]), shape(after, checks[1])
	onlyA, onlyB := diff(a, b)
	for _, l := range onlyA {
		fmt.Fprintf(w, "- %s (only in %s)\n", l, args[0])
	}
	for _, l := range onlyB {
		fmt.Fprintf(w, "+ %s (only in %s)\n", l, args[1])
	}
	if len(onlyA)+len(onlyB) > 0 {
		fmt.Fprintf(w, "labcompare: the files differ in %d of %d lines\n", len(onlyA)+len(onlyB), max(len(a), len(b)))
		return 1
	}
	fmt.Fprintf(w, "labcompare: same experiments, rows, claims, targets and figures not rerun (%d lines)\n", len(a))
	return 0
}

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }
