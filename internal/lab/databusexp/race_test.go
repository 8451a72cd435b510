//go:build race

package databusexp

// raceEnabled: the race detector slows the checker in the test's process
// several times over, so the end-to-end run is left to non-race runs (the
// checker and the gateway have race-tested suites of their own).
const raceEnabled = true
