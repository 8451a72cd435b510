package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestAncestors(t *testing.T) {
	for _, tc := range []struct {
		point, root, path string
		want              []string
	}{
		{"/sys/fs/cgroup", "/", "/kubepods/pod1/c1", []string{"/sys/fs/cgroup/kubepods/pod1/c1", "/sys/fs/cgroup/kubepods/pod1", "/sys/fs/cgroup/kubepods", "/sys/fs/cgroup"}},
		// A container's namespace: the mount's root is its own cgroup.
		{"/sys/fs/cgroup/memory", "/docker/abc", "/docker/abc", []string{"/sys/fs/cgroup/memory"}},
		{"/sys/fs/cgroup", "/other", "/docker/abc", nil},
	} {
		if got := ancestors(tc.point, tc.root, tc.path); !slices.Equal(got, tc.want) {
			t.Errorf("ancestors(%q, %q, %q) = %q, want %q", tc.point, tc.root, tc.path, got, tc.want)
		}
	}
}

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int64
		bad     bool
	}{
		{"1073741824\n", 1 << 30, false},
		{"max\n", 0, false},
		{"junk\n", 0, true},
	} {
		f := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readLimit(f)
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("readLimit(%q) = %d, %v; want %d, error %v", tc.content, got, err, tc.want, tc.bad)
		}
	}
}
