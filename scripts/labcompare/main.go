// Command labcompare checks that two `hlab lab --json` files describe the
// same lab: the same experiments, the same rows, the same claims (text,
// metric, rows, threshold), the same checks and the same figures not rerun.
// It ignores every measured number, verdict and note: a refactoring that
// should change nothing the lab does passes it with results from two
// different runs.
//
//	go run ./scripts/labcompare before.json after.json
//
// It prints what one file has and the other lacks, and exits 1 if
// anything differs, 2 if a file cannot be read. It reads the files as
// hlab does (report.ReadJSONFile); to compare the figures and verdicts of
// two runs, use hlab lab compare.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/highload-lab/hlab/internal/report"
)

// shape lists, as lines, what the lab did in a file: one line per
// experiment, row, claim, check and figure not rerun.
func shape(d report.Document) []string {
	var out []string
	for _, e := range d.Experiments {
		out = append(out, fmt.Sprintf("experiment %s (%s)", e.Name, e.Mode))
		for _, r := range e.Rows {
			out = append(out, fmt.Sprintf("%s: row %q", e.Name, r.Label))
		}
		for _, c := range e.Claims {
			out = append(out, fmt.Sprintf("%s: claim %q: %s of %q / %q, %s", e.Name, c.Claim, c.Metric, c.Numerator, c.Denominator, c.Threshold))
		}
		for _, c := range e.Checks {
			out = append(out, fmt.Sprintf("%s: check %q", e.Name, c.Text))
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

func run(args []string, w io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(w, "usage: labcompare BEFORE.json AFTER.json (both written by hlab lab --json)")
		return 2
	}
	before, err := report.ReadJSONFile(args[0])
	if err != nil {
		fmt.Fprintln(w, "labcompare:", err)
		return 2
	}
	after, err := report.ReadJSONFile(args[1])
	if err != nil {
		fmt.Fprintln(w, "labcompare:", err)
		return 2
	}
	a, b := shape(before), shape(after)
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
	fmt.Fprintf(w, "labcompare: same experiments, rows, claims, checks and figures not rerun (%d lines)\n", len(a))
	return 0
}

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }
