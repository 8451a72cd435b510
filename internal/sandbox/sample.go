package sandbox

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
)

const (
	// sampleEvery is the sampling interval.
	sampleEvery = 100 * time.Millisecond
	// idleEvery is the sampling interval of a process no Meter measures.
	// The lab runs several services at once, most of them idle between
	// their turns, and reading /proc for every process of each ten times a
	// second took a few percent of a core from the one being measured.
	idleEvery = time.Second
	// ringSize bounds the samples kept per process: ten minutes at 10 Hz.
	ringSize = 6000
	mib      = 1 << 20
)

// Sample is one reading of a process's resource use, taken every 100 ms.
type Sample struct {
	Time       time.Time
	CPU        float64 // cores used since the previous sample (0.2 = 20% of a core)
	CPUSeconds float64 // CPU time used since the process started
	RSSMB      float64 // resident memory in MiB
	Throttled  int64   // CFS throttled periods since the process started (0 when unknown)
}

// Usage summarizes the samples of one measurement window.
type Usage struct {
	CPUAvg    float64 // cores used on average over the window: CPU-time delta / wall delta
	CPUMax    float64 // highest CPU use of one sample interval within the window
	RSSMBAvg  float64 // resident memory in MiB, averaged over the samples
	RSSMBMax  float64 // highest resident memory in MiB
	Samples   int     // readings in the window: the 100 ms samples plus one at each end
	Throttled int64   // CFS throttled periods in the window (cgroups only, else 0)
}

// source reads the cumulative CPU time, RSS and throttling of a process
// and everything it started.
type source struct {
	pid      int
	pidStart uint64 // start time of pid, which may be reused once reaped
	procs    string // cgroup.procs listing the processes; "" walks /proc instead
	// usage is a precise cumulative CPU counter file ("" if none):
	// cpu.stat usage_usec on v2, cpuacct.usage (ns) on v1 when cpuacct
	// shares the cpu hierarchy.
	usage, usageKey string
	usageScale      float64 // to seconds
	cpuStat         string  // cpu.stat with nr_throttled, or ""

	ticks map[tickKey]uint64 // utime+stime last seen per process
	cum   float64            // CPU seconds counted from ticks

	// Without a cgroup: every live process seen descending from pid,
	// so that one whose parent died (re-parented to init, maybe in a
	// session of its own) is still counted and still killed by Stop.
	known map[tickKey]struct{}
}

type tickKey struct {
	pid   int
	start uint64
}

type reading struct {
	t         time.Time
	cpu       float64 // cumulative seconds
	rss       int64   // bytes
	throttled int64   // cumulative
}

func newSource(pid int, g *group) *source {
	s := &source{pid: pid, ticks: make(map[tickKey]uint64), known: make(map[tickKey]struct{})}
	if st, err := procfs.ReadStat(pid); err == nil { // not reaped yet: still ours
		s.pidStart = st.Start
	}
	if g == nil {
		return s
	}
	s.procs = filepath.Join(g.cpu, "cgroup.procs")
	s.cpuStat = filepath.Join(g.cpu, "cpu.stat")
	switch {
	case g.c.mech == CgroupV2:
		s.usage, s.usageKey, s.usageScale = s.cpuStat, "usage_usec", 1e-6
	case g.acct != "":
		s.usage, s.usageScale = filepath.Join(g.acct, "cpuacct.usage"), 1e-9
	default:
		if _, ok := readCounter(filepath.Join(g.cpu, "cpuacct.usage")); ok {
			s.usage, s.usageScale = filepath.Join(g.cpu, "cpuacct.usage"), 1e-9
		}
	}
	return s
}

func readCounter(file string) (int64, bool) {
	var n int64
	v := readString(file)
	if v == "" {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// members returns the processes to account: the cgroup's, or the
// process tree's.
func (s *source) members() []int {
	if s.procs != "" {
		pids, _ := readPids(s.procs)
		return pids
	}
	roots := []int{s.pid}
	for k := range s.known {
		roots = append(roots, k.pid)
	}
	tree := processTree(roots, s.pid)
	known := make(map[tickKey]struct{}, len(tree))
	pids := make([]int, 0, len(tree))
	for pid, st := range tree {
		k := tickKey{pid, st.Start}
		if _, was := s.known[k]; !was && k != s.root() && !s.descends(pid, tree) {
			continue // a known pid reused by a stranger, or its children
		}
		if st.Live() {
			known[k] = struct{}{}
		}
		pids = append(pids, pid)
	}
	s.known = known
	return pids
}

func (s *source) root() tickKey { return tickKey{s.pid, s.pidStart} }

// descends reports whether pid is in s.pid's process group or reaches
// s.pid or a known process through its parents in tree.
func (s *source) descends(pid int, tree map[int]procfs.Stat) bool {
	for range 64 {
		st, ok := tree[pid]
		if !ok {
			return false
		}
		if st.PGRP == s.pid {
			return true
		}
		if k := (tickKey{pid, st.Start}); k == s.root() {
			return true
		} else if _, ok := s.known[k]; ok {
			return true
		}
		pid = st.PPID
	}
	return false
}

// liveMembers refreshes the process set and returns it with start times,
// so the caller can kill them without hitting a reused pid.
func (s *source) liveMembers() []tickKey {
	pids := s.members()
	out := make([]tickKey, 0, len(pids))
	for _, pid := range pids {
		if st, err := procfs.ReadStat(pid); err == nil && st.Live() {
			out = append(out, tickKey{pid, st.Start})
		}
	}
	return out
}

func (s *source) read() reading {
	r := reading{t: time.Now()}
	pids := s.members()
	precise := false
	if s.usage != "" {
		var v int64
		var ok bool
		if s.usageKey != "" {
			v, ok = readKeyed(s.usage, s.usageKey)
		} else {
			v, ok = readCounter(s.usage)
		}
		if ok {
			r.cpu, precise = float64(v)*s.usageScale, true
		}
	}
	seen := make(map[tickKey]uint64, len(pids))
	for _, pid := range pids {
		if !precise {
			// Sum the growth of each process's own counter: a process that
			// exits takes its counter with it, which must not read as
			// negative CPU use.
			if st, err := procfs.ReadStat(pid); err == nil {
				k := tickKey{pid, st.Start}
				if prev := s.ticks[k]; st.Ticks > prev {
					s.cum += float64(st.Ticks-prev) / procfs.ClockTicks
				}
				seen[k] = st.Ticks
			}
		}
		if rss, err := readRSS(pid); err == nil {
			r.rss += rss
		}
	}
	if !precise {
		s.ticks = seen
		r.cpu = s.cum
	}
	if s.cpuStat != "" {
		r.throttled, _ = readKeyed(s.cpuStat, "nr_throttled")
	}
	return r
}

// sampler samples one process every sampleEvery while a Meter measures
// it, every idleEvery otherwise, until it exits or stops.
type sampler struct {
	mu       sync.Mutex
	src      *source
	prev     reading // last periodic sample (the process start at first)
	ring     []Sample
	next     int // ring write position once full
	meters   map[*Meter]struct{}
	finished bool
	skipped  int // ticks skipped since the last sample, while unmeasured

	stop chan struct{}
	done chan struct{}
}

func newSampler(src *source, started time.Time) *sampler {
	return &sampler{
		src:    src,
		prev:   reading{t: started},
		meters: make(map[*Meter]struct{}),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// run samples until exited is closed or finish is called.
func (s *sampler) run(exited <-chan struct{}) {
	defer close(s.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-exited:
			s.markFinished()
			return
		case <-s.stop:
			s.markFinished()
			return
		case <-t.C:
			s.tick()
		}
	}
}

func (s *sampler) markFinished() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
}

// finish stops sampling and waits for the sampling goroutine.
func (s *sampler) finish() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *sampler) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	if len(s.meters) == 0 && s.skipped < int(idleEvery/sampleEvery)-1 {
		s.skipped++
		return
	}
	s.skipped = 0
	r := s.src.read()
	smp := Sample{
		Time:       r.t,
		CPUSeconds: r.cpu,
		RSSMB:      float64(r.rss) / mib,
		Throttled:  r.throttled,
	}
	if dt := r.t.Sub(s.prev.t).Seconds(); dt > 0 {
		smp.CPU = max(0, r.cpu-s.prev.cpu) / dt
	}
	if len(s.ring) < ringSize {
		s.ring = append(s.ring, smp)
	} else {
		s.ring[s.next] = smp
		s.next = (s.next + 1) % ringSize
	}
	for m := range s.meters {
		m.add(r, smp.CPU, s.prev.t)
	}
	s.prev = r
}

// liveMembers returns the processes of the sampled process, for Stop.
func (s *sampler) liveMembers() []tickKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.liveMembers()
}

// samples returns the kept samples, oldest first.
func (s *sampler) samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}

// Meter is a measurement window over a process's samples, started by
// Process.Measure. Its methods are safe for concurrent use.
type Meter struct {
	s       *sampler
	empty   bool // the process had exited before the window opened
	first   reading
	last    reading
	n       int
	rssSum  float64
	rssMax  float64
	cpuMax  float64
	hasMax  bool
	stopped bool
	usage   Usage
}

// Measure opens a measurement window: the returned Meter summarizes the
// samples taken until its Stop. The window starts and ends with a reading
// of its own, so its CPU average covers exactly the time between Measure
// and Stop. Windows may overlap.
func (p *Process) Measure() *Meter {
	if p == nil { // no process of ours (a server the lab did not start): no usage
		return &Meter{stopped: true}
	}
	s := p.samp
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Meter{s: s}
	if s.finished {
		m.empty = true
		return m
	}
	r := s.src.read()
	m.first, m.last = r, r
	m.addRSS(r)
	s.meters[m] = struct{}{}
	return m
}

func (m *Meter) addRSS(r reading) {
	v := float64(r.rss) / mib
	m.n++
	m.rssSum += v
	m.rssMax = max(m.rssMax, v)
}

// add takes a periodic sample whose interval started at from.
func (m *Meter) add(r reading, cpu float64, from time.Time) {
	m.last = r
	m.addRSS(r)
	if !from.Before(m.first.t) { // the whole interval lies in the window
		m.cpuMax = max(m.cpuMax, cpu)
		m.hasMax = true
	}
}

// Stop closes the window and returns its summary. Calling it again
// returns the same Usage. After the process exited, the window ends at
// the last sample taken before the exit.
func (m *Meter) Stop() Usage {
	s := m.s
	if s == nil { // a Meter of no process (Measure on nil)
		return m.usage
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.stopped {
		return m.usage
	}
	m.stopped = true
	delete(s.meters, m)
	if m.empty {
		return m.usage
	}
	if !s.finished {
		r := s.src.read()
		m.last = r
		m.addRSS(r)
	}
	u := Usage{
		Samples:   m.n,
		RSSMBAvg:  m.rssSum / float64(m.n),
		RSSMBMax:  m.rssMax,
		Throttled: m.last.throttled - m.first.throttled,
	}
	if wall := m.last.t.Sub(m.first.t).Seconds(); wall > 0 {
		u.CPUAvg = max(0, m.last.cpu-m.first.cpu) / wall
	}
	u.CPUMax = u.CPUAvg
	if m.hasMax {
		u.CPUMax = max(m.cpuMax, u.CPUAvg)
	}
	m.usage = u
	return u
}

// cpuNow reads the process's cumulative CPU seconds now (its last
// reading once it has exited).
func (s *sampler) cpuNow() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return s.prev.cpu
	}
	return s.src.read().cpu
}

// CPUReading is the cumulative CPU time of every process a Sandbox runs,
// at one moment (ReadCPU).
type CPUReading struct {
	byProc map[*Process]float64
}

// ReadCPU reads, now, the CPU time every running process of the sandbox
// (each with what it started) has used: with Since, what the lab's
// services spent over a window, to tell it from what the rest of the
// machine spent.
func (s *Sandbox) ReadCPU() CPUReading {
	s.mu.Lock()
	procs := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	r := CPUReading{byProc: make(map[*Process]float64, len(procs))}
	for _, p := range procs {
		r.byProc[p] = p.samp.cpuNow()
	}
	return r
}

// Since returns the CPU seconds used between prev and r by the processes
// r read; one started after prev counts from its start, one stopped
// before r does not count at all.
func (r CPUReading) Since(prev CPUReading) float64 {
	var sum float64
	for p, v := range r.byProc {
		sum += max(0, v-prev.byProc[p])
	}
	return sum
}
