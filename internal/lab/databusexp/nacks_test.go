package databusexp

import (
	"context"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

// nackOnly is the experiment reduced to its nack rows: Kafka, the
// shared gateway, then those rows alone.
type nackOnly struct{ *Experiment }

func (nackOnly) Spec(o lab.Options) lab.Spec {
	s := New().Spec(o)
	s.Rows, s.Claims, s.Targets, s.Figures = nackRows(), nil, nackTargets(), nil
	return s
}

func (nackOnly) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, t: timings(run.Opts)}
	defer b.stop(ctx)
	if err := b.startKafka(ctx); err != nil {
		return err
	}
	return b.nacks(ctx)
}

// TestNackRows runs the nack rows for real, shortened: every row
// measured and verified, the dead letters as asked, nothing lost, and
// the fault row's kill injected while retries were pending.
func TestNackRows(t *testing.T) {
	res := labtest.RunQuick(t, nackOnly{New()})
	rows := byKey(res.Rows)
	for _, k := range []labresult.Key{noNackKey, nackKey, poisonKey, faultRetryKill} {
		r := rows[k]
		if r == nil || r.Lost == nil || *r.Lost != 0 {
			t.Fatalf("row %q: %+v, want it verified with 0 lost", k, r)
		}
	}
	if r := rows[nackKey]; r.Value(nackedFig) <= 0 || r.Value(redeliveredFig) < r.Value(nackedFig) || r.Value(duplicates) != 0 || r.Get(e2eP99MS) == nil {
		t.Errorf("nacked row's figures %v: want nacks, each redelivered, no duplicates, an e2e p99", r.Figures)
	}
	if r := rows[poisonKey]; r.Value(deadLetteredFig) != poisonKeys || r.Value(deadLetterDupsFig) != 0 || r.Value(deadLetterWrongFig) != 0 || r.Value(deadLetterOffFig) != 0 {
		t.Errorf("poison row's figures %v: want %d dead-lettered, all at delivery %d, none twice or wrong", r.Figures, poisonKeys, poisonDeliveries)
	}
	if r := rows[faultRetryKill]; r.Value(faultsInjected) != 1 || r.Value(nackedFig) <= 0 || r.Value(retriesPendingFig) < 1 {
		t.Errorf("fault row's figures %v: want a kill with retries pending, and nacks", r.Figures)
	}
	for _, tr := range res.Targets {
		if tr.Verdict != labresult.Holds {
			t.Errorf("target %q: %s (%v)", tr.Key, tr.Verdict, tr.Why)
		}
	}
	for _, r := range res.Rows {
		t.Logf("%s: %s", r.Label, r.Note)
	}
}
