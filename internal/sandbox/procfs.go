package sandbox

import (
	"os"
	"strconv"
	"strings"

	"github.com/highload-lab/hlab/internal/procfs"
)

// readRSS returns the resident set size of pid in bytes: the second field
// of /proc/<pid>/statm, in pages, the figure VmRSS of /proc/<pid>/status
// shows. statm is a fraction of the cost of status for the kernel to
// produce, and the lab reads it for every process it measures ten times a
// second. Zombies and kernel threads have none and report 0.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	return parseStatmRSS(b, int64(os.Getpagesize())), nil
}

// parseStatmRSS returns the resident pages of a statm line ("size
// resident shared text lib data dt") times pageSize; 0 if malformed.
func parseStatmRSS(b []byte, pageSize int64) int64 {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * pageSize
}

// readPids parses a cgroup.procs file.
func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// processTree returns the processes descending from any of roots, the
// roots themselves, and any process in process group pgid (a descendant
// re-parented away from the tree keeps its group unless it left it), each
// with its stat. It scans /proc, so it is only used when there is no
// cgroup to ask.
func processTree(roots []int, pgid int) map[int]procfs.Stat {
	out := make(map[int]procfs.Stat)
	all := procfs.All()
	children := make(map[int][]int)
	for pid, st := range all {
		children[st.PPID] = append(children[st.PPID], pid)
	}
	var queue []int
	for _, r := range roots {
		if st, ok := all[r]; ok {
			if _, dup := out[r]; !dup {
				out[r] = st
				queue = append(queue, r)
			}
		}
	}
	for pid, st := range all {
		if st.PGRP == pgid {
			if _, dup := out[pid]; !dup {
				out[pid] = st
				queue = append(queue, pid)
			}
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if _, dup := out[c]; !dup {
				out[c] = all[c]
				queue = append(queue, c)
			}
		}
	}
	return out
}

// readKeyed reads a "key value" per line file (cpu.stat, memory.events,
// memory.oom_control) and returns the value of key, or ok=false.
func readKeyed(file, key string) (v int64, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, val, found := strings.Cut(line, " ")
		if found && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// pidAlive reports whether pid is a live (not zombie) process started at
// start (clock ticks since boot), so a reused pid does not count.
func pidAlive(pid int, start uint64) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Start == start && st.Live()
}
