package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// OwnCgroupDirs returns the directories of the calling process's cgroup
// and of each of its ancestors, nearest first, in the mounted
// hierarchies: v1 those of the hierarchy that carries controller ctrl
// ("cpu", "memory"), v2 those of the unified hierarchy. A limit set on
// any ancestor binds the process too, so a reader of limits walks them
// all. Either is empty when that hierarchy is not mounted or the process
// is not in it.
func OwnCgroupDirs(ctrl string) (v1, v2 []string) {
	own, err := ReadCgroups("/proc/self/cgroup")
	if err != nil {
		return nil, nil
	}
	mounts, err := ReadMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, nil
	}
	v1Path, inV1 := CgroupPath(own, ctrl)
	v2Path, inV2 := CgroupPath(own, "")
	for _, m := range mounts {
		switch {
		case m.FSType == "cgroup" && inV1 && slices.Contains(m.Opts, ctrl):
			v1 = append(v1, ancestors(m.Point, m.Root, v1Path)...)
		case m.FSType == "cgroup2" && inV2:
			v2 = append(v2, ancestors(m.Point, m.Root, v2Path)...)
		}
	}
	return v1, v2
}

// ancestors returns the directories of cgroup path and its parents under
// a hierarchy mounted at point (whose root in the hierarchy is root).
func ancestors(point, root, path string) []string {
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil
	}
	var dirs []string
	for {
		dirs = append(dirs, filepath.Join(point, rel))
		if rel == "." || rel == "/" {
			return dirs
		}
		rel = filepath.Dir(rel)
	}
}

// noMemoryLimit is where cgroup v1 memory.limit_in_bytes values start to
// mean "no limit": the kernel shows its PAGE_COUNTER_MAX (2^63 less a
// page) there, not a word.
const noMemoryLimit = 1 << 62

// MemoryLimit returns the smallest memory limit, in bytes, on the path of
// the calling process's cgroup (v2 memory.max, v1 memory.limit_in_bytes),
// and the file that set it; 0 and "" when there is none (no cgroup
// limit, or cgroups not mounted). It is the limit past which the kernel's
// OOM killer ends the process, as a container's memory limit is.
func MemoryLimit() (limit int64, file string) {
	v1, v2 := OwnCgroupDirs("memory")
	consider := func(f string) {
		n, err := readLimit(f)
		if err == nil && n > 0 && n < noMemoryLimit && (limit == 0 || n < limit) {
			limit, file = n, f
		}
	}
	for _, dir := range v2 {
		consider(filepath.Join(dir, "memory.max"))
	}
	for _, dir := range v1 {
		consider(filepath.Join(dir, "memory.limit_in_bytes"))
	}
	return limit, file
}

// readLimit reads a cgroup file holding a number or "max".
func readLimit(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
