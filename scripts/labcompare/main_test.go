package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const before = `{"experiments":[{"name":"scale","mode":"quick","rows":[{"label":"one","rps":100},{"label":"three","rps":260}],
 "claims":[{"claim":"three serve more","metric":"rps","numerator":"three","denominator":"one","threshold":">= 2","ratio":2.6}],
 "checks":[{"check":"holds","holds":true}],"not_rerun":[{"figure":"cpu","why":"none"}]}]}`

func TestSameShapeDifferentNumbers(t *testing.T) {
	after := strings.NewReplacer(`"rps":100`, `"rps":90`, `"ratio":2.6`, `"ratio":1.1`, `"holds":true`, `"holds":false`).Replace(before)
	var out strings.Builder
	if code := run([]string{write(t, before), write(t, after)}, &out); code != 0 {
		t.Fatalf("exit %d for files that differ only in figures:\n%s", code, out.String())
	}
}

func TestDifferencesListed(t *testing.T) {
	for _, tt := range []struct{ name, from, to, want string }{
		{"row renamed", `"label":"three"`, `"label":"3 replicas"`, `+ scale: row "3 replicas"`},
		{"threshold", `">= 2"`, `">= 3"`, `- scale: claim "three serve more": rps of "three" / "one", >= 2`},
		{"check", `"check":"holds"`, `"check":"other"`, `+ scale: check "other"`},
		{"not rerun", `"figure":"cpu"`, `"figure":"mem"`, `- scale: not rerun "cpu"`},
		{"experiment", `"name":"scale"`, `"name":"scale2"`, `+ experiment scale2 (quick)`},
	} {
		var out strings.Builder
		code := run([]string{write(t, before), write(t, strings.Replace(before, tt.from, tt.to, 1))}, &out)
		if code != 1 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant a line %q", tt.name, code, out.String(), tt.want)
		}
	}
}

func TestUnreadableFile(t *testing.T) {
	var out strings.Builder
	if code := run([]string{write(t, `{}`), write(t, before)}, &out); code != 2 || !strings.Contains(out.String(), "no experiments") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
