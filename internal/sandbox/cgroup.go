package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
)

// parentName is the directory, under the lab's own cgroup in each
// hierarchy, that holds the cgroups of the processes it starts.
const parentName = "hlab"

// cfsPeriodUS is the CFS period: the quota is CPU * cfsPeriodUS microseconds
// of CPU time every cfsPeriodUS, as docker's --cpus does.
const cfsPeriodUS = 100000

// hier is one cgroup hierarchy the sandbox uses.
type hier struct {
	mount string // mount point, e.g. /sys/fs/cgroup/cpu
	ctrl  string // v1: the controller it is found by ("cpu", "memory"); v2: ""
	root  string // mountinfo root of the mount
	base  string // directory of the lab's own cgroup in it
}

func (h *hier) parent() string { return filepath.Join(h.base, parentName) }

// cgroups is a detected, usable cgroup setup.
type cgroups struct {
	mech     Mechanism
	cpu, mem *hier // v2: the same hier
	// acct is v1's cpuacct hierarchy when it is mounted apart from cpu
	// (nil otherwise): its cpuacct.usage counts the CPU of every process
	// that was ever in a group, those that exited included (a database's
	// short-lived backends), where sampling /proc misses them.
	acct *hier
	need []string // v2: controllers to enable in subtree_control
}

func (c *cgroups) hiers() []*hier {
	hs := []*hier{c.cpu}
	if c.mem != c.cpu {
		hs = append(hs, c.mem)
	}
	if c.acct != nil {
		hs = append(hs, c.acct)
	}
	return hs
}

// group is the cgroup of one process: a directory per hierarchy.
type group struct {
	c        *cgroups
	cpu, mem string // directories; equal on v2
	acct     string // the cpuacct directory, or ""
	memMB    int
}

func (g *group) dirs() []string {
	ds := []string{g.cpu}
	if g.mem != g.cpu {
		ds = append(ds, g.mem)
	}
	if g.acct != "" {
		ds = append(ds, g.acct)
	}
	return ds
}

// dirOf returns g's directory in hierarchy h.
func (g *group) dirOf(h *hier) string {
	switch h {
	case g.c.mem:
		return g.mem
	case g.c.acct:
		return g.acct
	}
	return g.cpu
}

// ownerStart is this process's start time (clock ticks since boot). With
// the pid it names the owner of a cgroup, so a later lab can tell whether
// the owner is still alive even when the pid has been reused.
var ownerStart = func() uint64 {
	st, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		return 0
	}
	return st.Start
}()

// groupSeq numbers cgroups across every Sandbox of this process.
var groupSeq atomic.Int64

// groupName is "<pid>.<start>-<name>-<seq>".
func groupName(name string, seq int64) string {
	return fmt.Sprintf("%d.%d-%s-%d", os.Getpid(), ownerStart, cleanName(name), seq)
}

// cleanName keeps a cgroup directory name short and unambiguous.
func cleanName(name string) string {
	b := []byte(name)
	if len(b) > 40 {
		b = b[:40]
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "proc"
	}
	return string(b)
}

// parseOwner extracts the owner from a name made by groupName.
func parseOwner(dir string) (pid int, start uint64, ok bool) {
	owner, _, found := strings.Cut(dir, "-")
	if !found {
		return 0, 0, false
	}
	p, s, found := strings.Cut(owner, ".")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

// runAs is the hint most "none" Reasons end with.
const runAs = "run hlab as root, or in a cgroup delegated to you: systemd-run --user --scope -p Delegate=yes hlab lab"

// detect finds a usable cgroup setup, sweeping cgroups left behind by
// labs that died. It returns nil and the reason when there is none.
func detect() (*cgroups, string) {
	mounts, err := procfs.ReadMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Sprintf("cannot read /proc/self/mountinfo (%v); CPU and memory limits are off", err)
	}
	own, err := procfs.ReadCgroups("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Sprintf("cannot read /proc/self/cgroup (%v); CPU and memory limits are off", err)
	}

	// cgroup v2: on a pure v2 machine the only choice; on a hybrid one
	// usable only when cpu and memory are attached to it, which is rare.
	var v2reason string
	if h := findHier(mounts, own, "cgroup2", ""); h != nil {
		var c *cgroups
		if c, v2reason = tryV2(h); c != nil {
			return c, ""
		}
		// The lab's own cgroup holds other processes, or is not ours:
		// as root, a cgroup below the hierarchy's root works too (the
		// root is exempt from "no internal processes"), as docker does.
		if h.base != h.mount {
			top := &hier{mount: h.mount, root: h.root, base: h.mount}
			if c, _ := tryV2(top); c != nil {
				return c, ""
			}
		}
	}

	cpu := findHier(mounts, own, "cgroup", "cpu")
	mem := findHier(mounts, own, "cgroup", "memory")
	switch {
	case cpu != nil && mem != nil:
		c := &cgroups{mech: CgroupV1, cpu: cpu, mem: mem}
		if acct := findHier(mounts, own, "cgroup", "cpuacct"); acct != nil && acct.mount != cpu.mount &&
			syscall.Access(acct.base, 2 /* W_OK */) == nil {
			c.acct = acct
		}
		reason := c.setup()
		if reason == "" {
			return c, ""
		}
		return nil, reason
	case cpu != nil || mem != nil:
		return nil, "cgroup v1: the cpu and memory controllers are not both mounted; mount both under /sys/fs/cgroup, or boot with cgroup v2"
	case v2reason != "":
		return nil, v2reason
	}
	return nil, "no cgroup hierarchy with the cpu and memory controllers is mounted; CPU and memory limits need Linux cgroups (v1 or v2)"
}

// tryV2 sets up cgroup v2 below h.base, or says why it can't.
func tryV2(h *hier) (*cgroups, string) {
	avail := strings.Fields(readString(filepath.Join(h.base, "cgroup.controllers")))
	if !hasAll(avail, "cpu", "memory") {
		return nil, fmt.Sprintf("cgroup v2: the cpu and memory controllers are not delegated to %s (it has %q); %s",
			h.base, strings.Join(avail, " "), runAs)
	}
	c := &cgroups{mech: CgroupV2, cpu: h, mem: h, need: []string{"cpu", "memory"}}
	if reason := c.setup(); reason != "" {
		return nil, reason
	}
	return c, ""
}

// setup checks that the lab may create cgroups, sweeps stale ones and, on
// v2, enables the controllers. It returns "" or why the cgroups are unusable.
func (c *cgroups) setup() string {
	for _, h := range c.hiers() {
		if err := syscall.Access(h.base, 2 /* W_OK */); err != nil {
			return fmt.Sprintf("%s: %s is not writable by uid %d (%v); %s", c.mech, h.base, os.Getuid(), err, runAs)
		}
	}
	c.sweep()
	if c.mech == CgroupV2 {
		return c.enableV2()
	}
	return ""
}

// enableV2 enables the controllers for the hlab directory and its
// children. cgroup v2 lets a non-root cgroup hand controllers to its
// children only while it holds no process itself ("no internal
// processes"); when the lab is the only process in its cgroup it moves
// itself into a leaf, hlab/<pid>.<start>-lab-0, to make that possible.
func (c *cgroups) enableV2() string {
	h := c.cpu
	if !hasAll(strings.Fields(readString(filepath.Join(h.base, "cgroup.subtree_control"))), c.need...) {
		err := writeFile(filepath.Join(h.base, "cgroup.subtree_control"), enableLine(c.need))
		if errors.Is(err, syscall.EBUSY) {
			pids, _ := readPids(filepath.Join(h.base, "cgroup.procs"))
			if len(pids) != 1 || pids[0] != os.Getpid() {
				return fmt.Sprintf("cgroup v2: cannot enable the cpu and memory controllers below %s: it also holds %d other process(es), and cgroup v2 forbids processes in a cgroup that hands controllers to its children; "+
					"run hlab in a cgroup of its own: systemd-run --user --scope -p Delegate=yes hlab lab, or as root",
					h.base, len(pids)-1)
			}
			leaf := filepath.Join(h.parent(), groupName("lab", 0))
			if err := os.MkdirAll(leaf, 0o755); err != nil {
				return fmt.Sprintf("cgroup v2: %v; %s", err, runAs)
			}
			if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
				return fmt.Sprintf("cgroup v2: moving the lab into %s: %v; %s", leaf, err, runAs)
			}
			err = writeFile(filepath.Join(h.base, "cgroup.subtree_control"), enableLine(c.need))
		}
		if err != nil {
			return fmt.Sprintf("cgroup v2: enabling %s in %s: %v; %s", strings.Join(c.need, ", "), h.base, err, runAs)
		}
	}
	if err := c.ensureParent(h); err != nil {
		return fmt.Sprintf("cgroup v2: %v; %s", err, runAs)
	}
	return ""
}

func enableLine(ctrls []string) string {
	var b strings.Builder
	for i, c := range ctrls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + c)
	}
	return b.String()
}

// ensureParent creates h's hlab directory and, on v2, hands the
// controllers on to its children.
func (c *cgroups) ensureParent(h *hier) error {
	p := h.parent()
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if c.mech == CgroupV2 && len(c.need) > 0 {
		sc := filepath.Join(p, "cgroup.subtree_control")
		if !hasAll(strings.Fields(readString(sc)), c.need...) {
			if err := writeFile(sc, enableLine(c.need)); err != nil {
				return fmt.Errorf("enabling %s in %s: %w", strings.Join(c.need, ", "), p, err)
			}
		}
	}
	return nil
}

// create makes the cgroup of one process and sets its limits.
func (c *cgroups) create(spec *Spec) (*group, error) {
	name := groupName(spec.Name, groupSeq.Add(1))
	g := &group{c: c, memMB: spec.MemoryMB}
	var made []string
	for _, h := range c.hiers() {
		dir := filepath.Join(h.parent(), name)
		var err error
		// Another lab may remove an empty hlab directory between our
		// ensureParent and Mkdir: try again.
		for try := 0; try < 5; try++ {
			if err = c.ensureParent(h); err != nil {
				break
			}
			if err = os.Mkdir(dir, 0o755); !errors.Is(err, fs.ErrNotExist) {
				break
			}
		}
		if err != nil {
			removeDirs(made)
			return nil, fmt.Errorf("%w: creating the cgroup of %q: %w (the lab needs write access to %s)", ErrCgroup, spec.Name, err, h.base)
		}
		made = append(made, dir)
		if h == c.cpu {
			g.cpu = dir
		}
		if h == c.mem {
			g.mem = dir
		}
		if h == c.acct {
			g.acct = dir
		}
	}
	if err := g.setLimits(spec); err != nil {
		removeDirs(made)
		return nil, fmt.Errorf("%w: limiting %q: %w", ErrCgroup, spec.Name, err)
	}
	return g, nil
}

func (g *group) setLimits(spec *Spec) error {
	quota := int64(spec.CPU*cfsPeriodUS + 0.5)
	mem := int64(spec.MemoryMB) << 20
	type kv struct {
		file, value string
		optional    bool
	}
	var w []kv
	if g.c.mech == CgroupV2 {
		if spec.CPU > 0 {
			w = append(w, kv{filepath.Join(g.cpu, "cpu.max"), fmt.Sprintf("%d %d", quota, cfsPeriodUS), false})
		}
		if spec.MemoryMB > 0 {
			w = append(w,
				kv{filepath.Join(g.mem, "memory.max"), strconv.FormatInt(mem, 10), false},
				// Without this the process could swap around the limit.
				kv{filepath.Join(g.mem, "memory.swap.max"), "0", true},
				// An OOM kill takes the whole service, not a random helper.
				kv{filepath.Join(g.mem, "memory.oom.group"), "1", true})
		}
	} else {
		if spec.CPU > 0 {
			w = append(w,
				kv{filepath.Join(g.cpu, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriodUS), false},
				kv{filepath.Join(g.cpu, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10), false})
		}
		if spec.MemoryMB > 0 {
			w = append(w,
				kv{filepath.Join(g.mem, "memory.limit_in_bytes"), strconv.FormatInt(mem, 10), false},
				// memsw is absent without swap accounting; swappiness 0 is
				// the fallback that keeps the process out of swap.
				kv{filepath.Join(g.mem, "memory.memsw.limit_in_bytes"), strconv.FormatInt(mem, 10), true},
				kv{filepath.Join(g.mem, "memory.swappiness"), "0", true})
		}
	}
	for _, x := range w {
		if x.optional {
			if _, err := os.Stat(x.file); err != nil {
				continue
			}
			_ = writeFile(x.file, x.value)
			continue
		}
		if err := writeFile(x.file, x.value); err != nil {
			return err
		}
	}
	return nil
}

// oomKills returns how many processes the memory limit killed.
func (g *group) oomKills() int64 {
	if g.c.mech == CgroupV2 {
		n, _ := readKeyed(filepath.Join(g.mem, "memory.events"), "oom_kill")
		return n
	}
	n, _ := readKeyed(filepath.Join(g.mem, "memory.oom_control"), "oom_kill")
	return n
}

// kill SIGKILLs every process in the group until it is empty.
func (g *group) kill(timeout time.Duration) error {
	return killDirs(g.c.mech, g.dirs(), timeout)
}

// remove kills what is left in the group and removes its directories.
func (g *group) remove() error {
	errK := g.kill(5 * time.Second)
	errR := removeDirs(g.dirs())
	return errors.Join(errK, errR)
}

func killDirs(mech Mechanism, dirs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if mech == CgroupV2 {
		for _, d := range dirs {
			_ = writeFile(filepath.Join(d, "cgroup.kill"), "1") // Linux 5.14+
		}
	}
	for {
		var left []int
		for _, d := range dirs {
			pids, _ := readPids(filepath.Join(d, "cgroup.procs"))
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			left = append(left, pids...)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: pids %v still in %s after %v", ErrNotDead, left, dirs[0], timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeDirs removes cgroup directories. Right after its last process
// exits a cgroup can still be busy for a moment, so EBUSY is retried.
func removeDirs(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		deadline := time.Now().Add(3 * time.Second)
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			errs = append(errs, fmt.Errorf("%w: removing %s: %w (remove it by hand once its processes are gone: rmdir %s)", ErrCgroup, d, err, d))
			break
		}
	}
	return errors.Join(errs...)
}

// sweep removes the cgroups whose owner is no longer alive, killing any
// process still in them, and the hlab directory when it is left empty.
func (c *cgroups) sweep() {
	for _, h := range c.hiers() {
		ents, err := os.ReadDir(h.parent())
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			pid, start, ok := parseOwner(e.Name())
			if !ok || pidAlive(pid, start) {
				continue
			}
			dir := filepath.Join(h.parent(), e.Name())
			_ = killDirs(c.mech, []string{dir}, 5*time.Second)
			_ = removeDirs([]string{dir})
		}
		_ = syscall.Rmdir(h.parent())
	}
}

// removeParents removes the hlab directories if no lab uses them.
func (c *cgroups) removeParents() {
	for _, h := range c.hiers() {
		_ = syscall.Rmdir(h.parent())
	}
}

// findHier finds the mounted hierarchy of fstype ("cgroup" or "cgroup2")
// carrying ctrl (v1) and the lab's own cgroup directory in it.
func findHier(mounts []procfs.Mount, own []procfs.Cgroup, fstype, ctrl string) *hier {
	path, ok := procfs.CgroupPath(own, ctrl)
	if !ok {
		return nil
	}
	for _, m := range mounts {
		if m.FSType != fstype || ctrl != "" && !slices.Contains(m.Opts, ctrl) {
			continue
		}
		h := &hier{mount: m.Point, ctrl: ctrl, root: m.Root}
		h.base = h.dir(path)
		if fi, err := os.Stat(h.base); err == nil && fi.IsDir() {
			return h
		}
	}
	return nil
}

// dir maps a path from /proc/<pid>/cgroup to a directory of the mount.
func (h *hier) dir(path string) string {
	if h.root != "/" && strings.HasPrefix(path, h.root) {
		path = strings.TrimPrefix(path, h.root)
	}
	return filepath.Join(h.mount, path)
}

func hasAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func readString(file string) string {
	b, _ := os.ReadFile(file)
	return strings.TrimSpace(string(b))
}

// writeFile writes value to a cgroup control file in one write(2), as the
// kernel expects, without creating or truncating anything.
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
