// Package procfs reads what the project needs of Linux's /proc about a
// process: its state, parent, process group and CPU time. The sandbox
// samples processes with it; hlab deps and the tests tell with it whether
// a process lives and which processes a group still has.
package procfs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// The kernel exports it as 100 on every Linux architecture Go supports
// (sysconf(_SC_CLK_TCK) is a constant in glibc and musl), so it is not
// read at run time.
const ClockTicks = 100

// Stat holds the fields of /proc/<pid>/stat the project uses.
type Stat struct {
	State      byte // R, S, D, Z, ...
	PPID, PGRP int
	Ticks      uint64 // utime + stime, in ClockTicks
	Start      uint64 // starttime, in ClockTicks since boot: tells a reused pid apart
}

// Live reports whether the process runs: a zombie (Z) or a dead one (X)
// does not, holds no port, and may never be reaped where nothing reaps
// orphans.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// Alive reports whether pid is a live process (Stat.Live).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := ReadStat(pid)
	return err == nil && st.Live()
}

var errBadStat = errors.New("procfs: malformed /proc/<pid>/stat")

// ParseStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) may contain spaces and parentheses, so fields are counted
// from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errBadStat
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return Stat{}, errBadStat
	}
	var st Stat
	var err error
	num := func(s string) uint64 {
		v, e := strconv.ParseUint(s, 10, 64)
		if e != nil && err == nil {
			err = errBadStat
		}
		return v
	}
	st.State = f[0][0]
	st.PPID = int(num(f[4-3]))
	st.PGRP = int(num(f[5-3]))
	st.Ticks = num(f[14-3]) + num(f[15-3])
	st.Start = num(f[22-3])
	return st, err
}

// All returns the stat of every process /proc lists, by pid; processes
// that end while it reads are left out.
func All() map[int]Stat {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make(map[int]Stat, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out
}
