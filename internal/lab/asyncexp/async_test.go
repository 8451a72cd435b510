package asyncexp

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) { labtest.SpecValid(t, New()) }

// TestEstimate: quick mode fits the budget below, with either Kafka,
// the fault rows included.
func TestEstimate(t *testing.T) {
	for _, kafka := range []string{lab.KafkaFake, lab.KafkaReal} {
		if est, budget := New().Estimate(lab.Options{Mode: lab.Quick, Kafka: kafka}), 4*time.Minute+30*time.Second; est > budget {
			t.Errorf("quick estimate with %s: %v, over the budget of %v", kafka, est, budget)
		}
	}
}

// delivered checks that every event the Kafka and databus rows' apps
// answered 200 for was consumed.
func delivered(t *testing.T, res *labresult.Result) {
	t.Helper()
	for _, mode := range busModes {
		for _, n := range conns {
			r := res.Row(key(mode, n))
			if r == nil {
				continue // Measured says so
			}
			produced, consumed := r.Value(eventsProduced), r.Value(eventsConsumed)
			if produced <= 0 || produced != consumed || r.Lost == nil || *r.Lost != 0 {
				t.Errorf("%s: produced %v, consumed %v, lost %v", r.Key, produced, consumed, r.Lost)
			}
			if r.Get(consumerLag) == nil {
				t.Errorf("%s: no consumer lag", r.Key)
			}
		}
	}
}

// faultsHappened checks the fault rows: answers before and after the
// outage; the sync app's event log refused while down (503, at once);
// the Kafka app's requests waited through its broker's outage, and every
// event it answered 200 for was consumed once the broker was back.
func faultsHappened(t *testing.T, res *labresult.Result) {
	t.Helper()
	if r := res.Row(faultEventLogKey); r != nil {
		if r.StatusCodes["200"] == 0 || r.StatusCodes["503"] == 0 {
			t.Errorf("%s: statuses %v, want 200s around the outage and 503s during it", r.Key, r.StatusCodes)
		}
	}
	if r := res.Row(faultBrokerKey); r != nil {
		if r.StatusCodes["200"] == 0 || r.MaxMS == nil || *r.MaxMS < 300 {
			t.Errorf("%s: statuses %v, max %v ms: want 200s, and requests that waited through the outage", r.Key, r.StatusCodes, r.MaxMS)
		}
		if r.Lost == nil || *r.Lost != 0 || r.Value(eventsConsumed) < r.Value(eventsRecorded) || r.Value(eventsRecorded) <= 0 {
			t.Errorf("%s: lost %v, %v events answered 200, %v consumed", r.Key, r.Lost, r.Value(eventsRecorded), r.Value(eventsConsumed))
		}
	}
}

// TestExperimentQuick runs the async experiment for real, its runs
// shortened (services under quota, kfake, the gateway), and checks the
// rows: every one measured and every request answered, and in the Kafka
// and databus rows every event answered 200 was consumed; in the fault
// rows, that the outage happened under the load and the Kafka app lost
// nothing across its broker's kill. Whether the claims hold is the lab's
// verdict, not the test's.
func TestExperimentQuick(t *testing.T) {
	res := labtest.RunQuick(t, New())
	for _, r := range res.Rows {
		if r.Key == faultBrokerKey || r.Key == faultEventLogKey {
			continue
		}
		if r.RPS == nil || *r.RPS <= 0 || r.SuccessRatio == nil || *r.SuccessRatio != 1 {
			t.Errorf("%s: rps %v, success %v", r.Key, r.RPS, r.SuccessRatio)
		}
	}
	delivered(t, res)
	faultsHappened(t, res)
	for _, c := range res.Claims {
		if c.Ratio == nil || c.Pairs != 2 || c.Verdict == labresult.Invalid {
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
	delivered(t, res)
	if left := labtest.KafkaLeftovers(t, brokers); len(left) > 0 {
		t.Errorf("left on the brokers: %v", left)
	}
}
