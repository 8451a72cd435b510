package scaleexp

import (
	"os"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/lb"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestBuiltinSetupDeclared holds the built-in balancer's settings, as the
// claims' rows start it, to what the setup declares for it: the run holds
// them too (UsedInFirstClaim), but only where nginx is not installed.
func TestBuiltinSetupDeclared(t *testing.T) {
	got := lb.Config{Upstreams: []string{"127.0.0.1:1"}}.String()
	if labresult.SetupText(got) != labresult.SetupText(oursBuiltin) {
		t.Fatalf("the built-in balancer runs\n%s\nthe setup declares\n%s", got, oursBuiltin)
	}
}

// TestShortRun runs the experiment with its runs shortened, with the
// balancer the lab picks (nginx where installed) and with the built-in
// one: every row of its Spec measured (the fault rows included), every
// claim's ratio and target's value read, and the balancer's config and
// the handler the claims' rows ran held to the declared setup (the run
// fails otherwise).
func TestShortRun(t *testing.T) {
	for _, balancer := range []string{lab.LBAuto, lab.LBBuiltin} {
		t.Run(balancer, func(t *testing.T) {
			res := labtest.RunQuickOptions(t, New(), lab.Options{LB: balancer})
			for _, c := range res.Claims {
				if c.Pairs != 2 {
					t.Errorf("claim %q: %d pairs, want the 2 the test asked for", c.Claim, c.Pairs)
				}
			}
			for _, k := range []labresult.Key{faultReplicaBuiltin, faultLB} {
				r := res.Row(k)
				if r == nil || r.SuccessRatio == nil || r.P99MS == nil {
					t.Errorf("fault row %q lacks its success ratio or p99: %+v", k, r)
				}
			}
			if want := !(lab.Options{LB: balancer}).UsesNginx(); strings.HasPrefix(res.Env["lb"], "builtin") != want {
				t.Errorf("env lb = %q with --lb %s", res.Env["lb"], balancer)
			}
		})
	}
}
