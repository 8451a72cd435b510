//go:build !race

package databusexp

const raceEnabled = false
