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
// anything differs, 2 if a file cannot be read.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
)

// doc is the part of the lab's JSON this compares (DESIGN.md's contract).
type doc struct {
	Experiments []struct {
		Name   string                   `json:"name"`
		Mode   string                   `json:"mode"`
		Rows   []struct{ Label string } `json:"rows"`
		Claims []struct {
			Claim       string `json:"claim"`
			Metric      string `json:"metric"`
			Numerator   string `json:"numerator"`
			Denominator string `json:"denominator"`
			Threshold   string `json:"threshold"`
		} `json:"claims"`
		Checks []struct {
			Text string `json:"check"`
		} `json:"checks"`
		NotRerun []struct {
			Figure string `json:"figure"`
		} `json:"not_rerun"`
	} `json:"experiments"`
}

// shape lists, as lines, what the lab did in a file: one line per
// experiment, row, claim, check and figure not rerun.
func shape(d doc) []string {
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

func read(path string) (doc, error) {
	var d doc
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Experiments) == 0 {
		return d, fmt.Errorf("%s: no experiments: is it hlab lab --json output?", path)
	}
	return d, nil
}

func run(args []string, w io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(w, "usage: labcompare BEFORE.json AFTER.json (both written by hlab lab --json)")
		return 2
	}
	before, err := read(args[0])
	if err != nil {
		fmt.Fprintln(w, "labcompare:", err)
		return 2
	}
	after, err := read(args[1])
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
