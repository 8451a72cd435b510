package scaleexp

import (
	"os"
	"testing"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestShortRun runs the experiment with its runs shortened: every row of
// its Spec measured, both claims' ratios read.
func TestShortRun(t *testing.T) {
	res := labtest.RunQuick(t, New())
	for _, c := range res.Claims {
		if c.Pairs != 2 {
			t.Errorf("claim %q: %d pairs, want the 2 the test asked for", c.Claim, c.Pairs)
		}
	}
}
