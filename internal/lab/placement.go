package lab

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/highload-lab/hlab/internal/sandbox"
)

// Plan is where the measured processes run: which cores the load
// generator (the lab's own process), each process with a CPU quota, and
// the processes without one get, so that none shares a core with another
// while it is measured. OK is false when the machine has too few cores
// for that; then every process may run on every core, and Why says so.
type Plan struct {
	Generator []int
	// Own lists, for each demand in order, its cores: nil for a demand
	// without a quota (those share Shared).
	Own    [][]int
	Shared []int
	OK     bool
	Why    string
}

// planCores places demands (each a process's CPU quota in cores; 0: none)
// on cores 0..cores-1: the load generator gets a quarter of the machine
// (at least one core), each process with a quota ceil(quota) cores of
// its own, and the processes without a quota share at least one core of
// their own; cores left over go to the generator. A quota of 0.2 still
// gets a whole core: its CFS quota then throttles it there and nowhere
// else, and nothing else runs beside it.
func planCores(cores int, demands []float64) Plan {
	gen := max(1, cores/4)
	need := gen
	unconstrained := false
	for _, q := range demands {
		if q > 0 {
			need += int(math.Ceil(q - 1e-9))
		} else {
			unconstrained = true
		}
	}
	if unconstrained {
		need++
	}
	if need > cores {
		return Plan{Why: fmt.Sprintf("%d cores cannot give the load generator (%d), each of the %d processes with a quota (%d) and those without (%d) cores of their own: they share the machine's cores",
			cores, gen, countQuota(demands), need-gen-boolInt(unconstrained), boolInt(unconstrained))}
	}
	p := Plan{OK: true, Own: make([][]int, len(demands))}
	next := 0
	take := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	p.Generator = take(gen)
	for i, q := range demands {
		if q > 0 {
			p.Own[i] = take(int(math.Ceil(q - 1e-9)))
		}
	}
	if unconstrained {
		p.Shared = take(1)
	}
	for next < cores { // the rest to the generator, or to the shared ones
		if unconstrained {
			p.Shared = append(p.Shared, next)
		} else {
			p.Generator = append(p.Generator, next)
		}
		next++
	}
	return p
}

func countQuota(demands []float64) int {
	n := 0
	for _, q := range demands {
		if q > 0 {
			n++
		}
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// place applies the plan for every process the sandbox runs now, before
// a measurement: on a machine with cores enough, each gets its own; else
// every process may use every core (undoing an earlier placement). The
// env and the rows measured next say which.
func (r *Run) place() {
	if r.Sandbox == nil {
		return
	}
	procs := r.Sandbox.Processes()
	sort.Slice(procs, func(i, j int) bool { return procs[i].Name() < procs[j].Name() })
	demands := make([]float64, len(procs))
	for i, p := range procs {
		demands[i], _ = p.CPUQuota()
	}
	plan := planCores(runtime.NumCPU(), demands)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !plan.OK {
		if r.pinned {
			for _, p := range procs {
				p.SetCPUs(nil)
			}
			sandbox.SetCPUs(os.Getpid(), nil)
			r.pinned = false
		}
		r.res.Env["placement"] = "shared: " + plan.Why
		r.placed = "shared"
		return
	}
	var parts []string
	for i, p := range procs {
		cpus := plan.Own[i]
		if cpus == nil {
			cpus = plan.Shared
		}
		if err := p.SetCPUs(cpus); err != nil {
			r.Progress.Logf("placement: %v", err)
		}
		parts = append(parts, fmt.Sprintf("%s on %v", p.Name(), cpus))
	}
	if err := sandbox.SetCPUs(os.Getpid(), plan.Generator); err != nil {
		r.Progress.Logf("placement: %v", err)
	}
	r.pinned = true
	r.res.Env["placement"] = fmt.Sprintf("own cores: load generator on %v; %s", plan.Generator, strings.Join(parts, ", "))
	r.placed = "own cores"
}
