package cpuuse

import "golang.org/x/sys/unix"

// affinity returns the number of CPUs in the process's affinity mask, or 0.
func affinity() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}
