// Package labresult is the lab's result model: what an experiment
// measured (rows, each with a stable Key and figures named in one table,
// Metrics), what it concluded (claims of the report and targets of ours,
// each a judgement kept as data with its interval), and how a run is
// written to and read from JSON (the CLI contract).
//
// It is the bottom layer of the lab, as golang/perf's benchfmt and
// benchmath are of benchstat: it imports nothing of the systems, the
// runner or the dependencies, so that the programs that only read results
// (package report, package labcompare) import nothing else. The runner
// (package lab) fills its types; experiments declare their claims,
// targets and figures with them.
//
// Rows are joined by Key everywhere a program joins them (claims, gates,
// targets, comparisons of two runs); a row's Label is for reading, and
// rewording it changes nothing a program computes.
package labresult
