//go:build !linux

package loadgen

// runEngines: the event loop is Linux-only; elsewhere every worker owns a
// goroutine.
func (r *runner) runEngines() bool { return false }
