package asyncexp

import (
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

// TestPlan checks that the claim compares rows the experiment measures and
// that quick mode fits the budget below.
func TestPlan(t *testing.T) {
	labels := map[string]bool{}
	for _, mode := range modes {
		for _, n := range conns {
			labels[label(mode, n)] = true
		}
	}
	labtest.ClaimsMeasured(t, New(), labels)
	for l := range refs {
		if !labels[l] {
			t.Errorf("reference figures for %q, a row that is not measured", l)
		}
	}
	for _, kafka := range []string{lab.KafkaFake, lab.KafkaReal} {
		if est, budget := New().Estimate(lab.Options{Mode: lab.Quick, Kafka: kafka}), 4*time.Minute; est > budget {
			t.Errorf("quick estimate with %s: %v, over the budget of %v", kafka, est, budget)
		}
	}
}

// TestExperimentQuick runs the async experiment for real, its runs
// shortened (services under quota, kfake, the gateway), and checks the
// rows: every one measured, and in the Kafka and databus rows every event
// answered 200 was consumed. Whether the claims hold is the lab's
// verdict, not the test's.
func TestExperimentQuick(t *testing.T) {
	res := labtest.RunQuick(t, New())
	if len(res.Rows) != 8 {
		t.Fatalf("%d rows, want 8", len(res.Rows))
	}
	for _, r := range res.Rows {
		if r.RPS == nil || *r.RPS <= 0 || r.SuccessRatio == nil || *r.SuccessRatio != 1 {
			t.Errorf("%s: rps %v, success %v", r.Label, r.RPS, r.SuccessRatio)
		}
		if strings.HasPrefix(r.Label, modeSync) {
			continue
		}
		f := r.Figures
		if f["events_produced"] <= 0 || f["events_produced"] != f["events_consumed"] || r.Lost == nil || *r.Lost != 0 {
			t.Errorf("%s: produced %v, consumed %v, lost %v", r.Label, f["events_produced"], f["events_consumed"], r.Lost)
		}
		if _, ok := f["consumer_lag_at_end"]; !ok {
			t.Errorf("%s: no consumer lag", r.Label)
		}
	}
	for _, c := range res.Claims {
		if c.Ratio == nil || c.Pairs != 2 || c.Verdict == lab.Invalid {
			t.Errorf("claim %q: ratio %v over %d pairs, %s (%s)", c.Claim, c.Ratio, c.Pairs, c.Verdict, c.Why)
		}
	}
}

// TestExternalKafka runs the experiment, its runs shortened, against
// brokers it did not start ("hlab deps up kafka", given as
// --kafka-brokers gives them, as a remote cluster would be):
// the run records them, and leaves them running with none of its topics
// or consumer groups.
func TestExternalKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the experiment")
	}
	brokers := strings.Split(labtest.DepsUp(t, "kafka"), ",")
	res := labtest.RunQuickWith(t, New(), lab.External{KafkaBrokers: brokers})
	labtest.ExternalEnv(t, res.Env, "kafka", "")
	if !strings.Contains(res.Env["kafka"], strings.Join(brokers, ",")) {
		t.Errorf("env kafka = %q: want the brokers %v", res.Env["kafka"], brokers)
	}
	for _, r := range res.Rows {
		if strings.HasPrefix(r.Label, modeSync) {
			continue
		}
		if f := r.Figures; f["events_produced"] <= 0 || f["events_produced"] != f["events_consumed"] || r.Lost == nil || *r.Lost != 0 {
			t.Errorf("%s: produced %v, consumed %v, lost %v", r.Label, f["events_produced"], f["events_consumed"], r.Lost)
		}
	}
	if left := labtest.KafkaLeftovers(t, brokers); len(left) > 0 {
		t.Errorf("left on the brokers: %v", left)
	}
}
