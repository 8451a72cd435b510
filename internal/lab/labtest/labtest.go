// Package labtest runs an experiment from its tests, in either of the two
// ways the lab's tests check one: in this process through lab.RunAll,
// for typed results, or as a user does, "hlab lab NAME --json", for the
// JSON contract. Both run the hlab binary testkit.HlabBinary gives, so
// each test process builds it once, and both skip in -short mode as it
// does.
package labtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testkit"
)

// RunQuick runs exp in this process in quick mode, its runs shortened,
// over two pairs, and returns its result; it fails t when the run cannot
// start, the experiment reports an error (with the run's progress), or
// it did not measure what its Spec declares (Measured). Whether its
// claims hold is the lab's verdict, not a test's.
func RunQuick(t *testing.T, exp lab.Experiment) *labresult.Result {
	t.Helper()
	return RunQuickWith(t, exp, lab.External{})
}

// RunQuickWith is RunQuick on the external servers ext names.
func RunQuickWith(t *testing.T, exp lab.Experiment, ext lab.External) *labresult.Result {
	t.Helper()
	return RunQuickOptions(t, exp, lab.Options{External: ext})
}

// RunQuickOptions is RunQuick with the choices opts makes (its External,
// LB, Kafka); the mode, the shortening, the pairs and the paths are
// RunQuick's.
func RunQuickOptions(t *testing.T, exp lab.Experiment, opts lab.Options) *labresult.Result {
	t.Helper()
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var progress strings.Builder
	opts.Mode, opts.Short, opts.Pairs, opts.Self, opts.WorkDir = lab.Quick, true, 2, bin, t.TempDir()
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp}, opts, sb, lab.NewProgress(&progress, false))
	if err != nil {
		t.Fatal(err)
	}
	res := results[0]
	if res.Error != "" {
		t.Fatalf("experiment failed: %s\n%s", res.Error, progress.String())
	}
	Measured(t, exp, opts, res)
	return res
}

// RunCLI runs "hlab lab name args... --json FILE --report DIR" as a user
// does, decodes FILE into doc and returns what the command printed and
// FILE's bytes; it fails t (with the output) when the command fails or
// FILE does not decode.
func RunCLI(t *testing.T, name string, doc any, args ...string) (printed, written []byte) {
	t.Helper()
	bin := testkit.HlabBinary(t)
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	args = append([]string{"lab", name}, args...)
	args = append(args, "--json", jsonPath, "--report", filepath.Join(dir, "report"))
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hlab lab %s: %v\n%s", name, err, out)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, doc); err != nil {
		t.Fatalf("%s: %v\n%s", jsonPath, err, b)
	}
	return out, b
}

// SpecValid checks exp's Spec in both modes (lab.Spec.Validate): every
// key a claim, gate or target reads is a declared row, every figure they
// read is known, nothing is declared twice.
func SpecValid(t testing.TB, exp lab.Experiment) {
	t.Helper()
	for _, mode := range []lab.Mode{lab.Quick, lab.Full} {
		spec := exp.Spec(lab.Options{Mode: mode})
		if err := spec.Validate(); err != nil {
			t.Errorf("%s mode: %v", mode, err)
		}
	}
}

// Measured checks that a run of exp measured what its Spec declares with
// opts: every declared row, every claim over measured rows (its ratio
// read, whatever its verdict), every target and shown ratio with a value.
// Whether claims reproduce and targets hold is the lab's verdict, not a
// test's.
func Measured(t testing.TB, exp lab.Experiment, opts lab.Options, res *labresult.Result) {
	t.Helper()
	spec := exp.Spec(opts)
	for _, r := range spec.Rows {
		if res.Row(r.Key) == nil {
			t.Errorf("row %q (%s) was not measured", r.Key, r.Label)
		}
	}
	for _, c := range res.Claims {
		if c.Ratio == nil {
			t.Errorf("claim %q has no ratio: %s", c.Claim, c.Why)
		}
	}
	judged := append(slices.Clone(res.Targets), res.Ratios...)
	for _, tr := range judged {
		if tr.Value == nil {
			t.Errorf("target %q has no value: %s", tr.Key, tr.Why)
		}
	}
	if len(judged) != len(spec.Targets) {
		t.Errorf("%d targets and shown ratios judged, the Spec declares %d", len(judged), len(spec.Targets))
	}
}
