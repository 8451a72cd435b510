//go:build !linux

package cpuuse

func affinity() int { return 0 }

func cgroupQuota(string) (float64, bool) { return 0, false }
