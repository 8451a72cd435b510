package lab

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// noiseProbe reads, at one moment, how much CPU the whole machine, the
// lab's own process (the load generator, the checker) and the processes
// of its sandbox have used, so that two probes give the CPU used by
// everything else: other builds, a noisy neighbour, a stolen vCPU.
type noiseProbe struct {
	t       time.Time
	busy    float64 // machine: user + nice + system + irq + softirq + steal, seconds
	self    float64 // the lab's process, all threads, seconds
	sandbox sandbox.CPUReading
	ok      bool
}

func probeNoise(sb *sandbox.Sandbox) noiseProbe {
	p := noiseProbe{t: time.Now()}
	busy, ok := machineBusy()
	if !ok {
		return p
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return p
	}
	p.busy, p.ok = busy, true
	p.self = tv(ru.Utime) + tv(ru.Stime)
	if sb != nil {
		p.sandbox = sb.ReadCPU()
	}
	return p
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// outsideSince returns the cores used outside the lab between from and
// p, averaged over the interval, and whether it could tell. The kernel
// charges a process, tick by tick, for the interrupts it serves while it
// runs (the lab's own network traffic), where /proc/stat files them as
// irq and softirq: the machine's side counts them too, so that the lab's
// own traffic does not read as someone else's CPU.
func (p noiseProbe) outsideSince(from noiseProbe) (float64, bool) {
	wall := p.t.Sub(from.t).Seconds()
	if !p.ok || !from.ok || wall <= 0 {
		return 0, false
	}
	ours := (p.self - from.self) + p.sandbox.Since(from.sandbox)
	return max(0, (p.busy-from.busy)-ours) / wall, true
}

// machineBusy reads the machine's busy CPU time from /proc/stat's first
// line: user, nice, system, irq, softirq and steal (time the hypervisor
// gave to another guest), in seconds.
func machineBusy() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var sum float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, false
		}
		sum += v
	}
	return sum / procfs.ClockTicks, true // USER_HZ, the unit of /proc/stat too
}

// loadAverage returns the 1-minute load average, nil where unknown.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil
	}
	return &v
}
