package procfs

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo.
type Mount struct {
	Point, Root, FSType string
	Opts                []string // super options
}

// ReadMountinfo reads a /proc/<pid>/mountinfo file.
func ReadMountinfo(file string) ([]Mount, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Mount
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		out = append(out, Mount{Point: unescape(f[4]), Root: unescape(f[3]), FSType: g[0], Opts: strings.Split(g[2], ",")})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Cgroup is one line of /proc/<pid>/cgroup.
type Cgroup struct {
	Ctrls []string // v1 controllers; nil for the v2 line "0::/path"
	Path  string
}

// ReadCgroups reads a /proc/<pid>/cgroup file.
func ReadCgroups(file string) ([]Cgroup, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Cgroup
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		l := Cgroup{Path: parts[2]}
		if parts[1] != "" {
			l.Ctrls = strings.Split(parts[1], ",")
		}
		out = append(out, l)
	}
	return out, nil
}

// CgroupPath returns the path in the hierarchy of the v1 controller ctrl,
// or in the v2 hierarchy for "".
func CgroupPath(lines []Cgroup, ctrl string) (string, bool) {
	for _, l := range lines {
		if ctrl == "" && l.Ctrls == nil || ctrl != "" && slices.Contains(l.Ctrls, ctrl) {
			return l.Path, true
		}
	}
	return "", false
}
