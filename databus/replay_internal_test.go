package databus

import (
	"slices"
	"testing"
	"time"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// TestReplayFromMetadata: what each ReplayFrom sends, and where a replay
// from offsets reopens after its handler had some messages.
func TestReplayFromMetadata(t *testing.T) {
	at := time.UnixMilli(1795780000123)
	tests := []struct {
		from ReplayFrom
		want []string
	}{
		{FromTime(at), []string{databusv1.MDStartTime, "1795780000123"}},
		{FromTime(at).UntilNow(), []string{databusv1.MDStartTime, "1795780000123", databusv1.MDReplayEnd, "now"}},
		{FromOffsets(map[int32]int64{3: 0, 0: 1500}), []string{databusv1.MDStartOffsets, "0:1500,3:0"}},
		// Reopened after offsets 0:1500-1509 were handled: partition 0
		// moves past them, 3 stays, 7 (not listed) is not added.
		{FromOffsets(map[int32]int64{3: 0, 0: 1500}).resumed(map[int32]int64{0: 1510, 7: 9}), []string{databusv1.MDStartOffsets, "0:1510,3:0"}},
		// A time stays a time: what was handled is skipped as it comes.
		{FromTime(at).resumed(map[int32]int64{0: 5}), []string{databusv1.MDStartTime, "1795780000123"}},
	}
	for _, tt := range tests {
		got, err := tt.from.metadata()
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("got %v, %v; want %v", got, err, tt.want)
		}
	}
	for _, bad := range []ReplayFrom{{}, FromOffsets(map[int32]int64{})} {
		if _, err := bad.metadata(); err == nil {
			t.Errorf("%+v: want an error saying where to start", bad)
		}
	}
}
