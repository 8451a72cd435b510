package crudexp

import (
	"os"
	"testing"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestShortRun runs the experiment, on a Postgres of its own as "hlab lab
// crud" starts one, with its runs shortened and its seed small: every
// row of its Spec measured, the claim's ratio over the two pairs the test
// asks for, every target and shown ratio read.
func TestShortRun(t *testing.T) {
	res := labtest.RunQuick(t, New())
	if c := res.Claims[0]; c.Pairs != 2 {
		t.Errorf("claim %q: %d pairs, want the 2 the test asked for", c.Claim, c.Pairs)
	}
	for _, row := range res.Rows {
		if row.Key != deliveryKey {
			continue
		}
		t.Logf("%s: %s", row.Label, row.Note)
		if row.Lost == nil || *row.Lost != 0 || row.Value(eventsReceived) == 0 {
			t.Errorf("%s: lost %v, received %v; want every event received", row.Label, row.Lost, row.Value(eventsReceived))
		}
	}
}
