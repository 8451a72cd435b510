package databusexp

import (
	"context"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

// replayOnly is the experiment cut to its replay row: Kafka, then the
// row, through the lab's machinery (quota, gateway process, targets).
type replayOnly struct{ *Experiment }

func (replayOnly) Spec(o lab.Options) lab.Spec {
	s := New().Spec(o)
	s.Rows, s.Targets, s.Claims, s.Figures, s.Setup = []lab.RowSpec{replayRow(o)}, replayTargets(), nil, nil, nil
	return s
}

func (replayOnly) Run(ctx context.Context, run *lab.Run) error {
	b := &bench{run: run, t: timings(run.Opts)}
	defer b.stop(ctx)
	var err error
	if b.k, err = run.StartKafka(ctx, partitions); err != nil {
		return err
	}
	return b.replayFromTime(ctx)
}

// TestReplayRow runs the replay row alone, for real (kfake, the gateway
// under its quota): every message at or after the time delivered once,
// none before it, and both targets judged to hold.
func TestReplayRow(t *testing.T) {
	res := labtest.RunQuick(t, replayOnly{New()})
	var row *labresult.Row
	for _, r := range res.Rows {
		if r.Key == replayKey {
			row = r
		}
	}
	if row == nil || row.Lost == nil || row.RPS == nil {
		t.Fatalf("no replay row measured: %+v", res.Rows)
	}
	t.Logf("%s: %.0f msgs/s, %d missing, %v extra; %s", row.Key, *row.RPS, *row.Lost, row.Value(replayExtra), row.Note)
	if *row.Lost != 0 || row.Value(replayExtra) != 0 || row.Value(received) != float64(replayMessages(lab.Options{Mode: lab.Quick, Short: true}))/2 {
		t.Errorf("missing %d, extra %v, received %v: want 0, 0 and half the messages", *row.Lost, row.Value(replayExtra), row.Value(received))
	}
	for _, tg := range res.Targets {
		t.Logf("target %s: %s", tg.Key, tg.Verdict)
		if tg.Verdict != "holds" {
			t.Errorf("target %s: %s", tg.Key, tg.Verdict)
		}
	}
}
