package replicaexp

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock is a reading of the machine's busy CPU time (/proc/stat) and
// of this process's (the load generator's) own, to tell whether a row was
// bound by its service or by the machine: on 2 cores, a service at 1 CPU,
// Postgres and the load generator can need more than there is.
type cpuClock struct {
	at          time.Time
	busy, total float64 // machine, in clock ticks (all CPUs)
	self        float64 // this process, seconds
}

func readCPUClock() cpuClock {
	c := cpuClock{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		if len(fields) > 5 && fields[0] == "cpu" {
			for i, f := range fields[1:] {
				v, _ := strconv.ParseFloat(f, 64)
				if i >= 8 { // guest time is counted in user already
					break
				}
				c.total += v
				if i != 3 && i != 4 { // idle, iowait
					c.busy += v
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return c
}

// since returns the cores the whole machine and this process used on
// average between c0 and c (cpus is the machine's CPU count).
func (c cpuClock) since(c0 cpuClock, cpus int) (machine, self float64) {
	wall := c.at.Sub(c0.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	if dt := c.total - c0.total; dt > 0 {
		machine = (c.busy - c0.busy) / dt * float64(cpus)
	}
	return machine, (c.self - c0.self) / wall
}
