//go:build !race

package databus

const raceEnabled = false
