package gateway

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestReplicaShortfall(t *testing.T) {
	d := kadm.TopicDetail{Topic: "t", Partitions: kadm.PartitionDetails{
		0: {Topic: "t", Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		1: {Topic: "t", Partition: 1, Leader: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{3}},
		2: {Topic: "t", Partition: 2, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{2}},
	}}
	for _, tc := range []struct {
		name      string
		partition int32
		minISR    int
		want      []string // "" alone: nothing short
	}{
		{"the partition asked for is short", 1, 2, []string{"not enough in-sync replicas", `partition 1 of topic "t"`, "1 in sync (brokers [3]) of 3", "min.insync.replicas=2"}},
		{"no leader", 2, 2, []string{`partition 2 of topic "t" has no leader`}},
		{"a healthy partition: the first short one is named", 0, 2, []string{"partition 1 of"}},
		{"min.insync.replicas unknown", 1, 0, []string{"1 of its 3 replicas in sync", "down or lagging: [1 2]"}},
		{"nothing short", 0, 1, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dd := d
			if tc.want[0] == "" {
				dd.Partitions = kadm.PartitionDetails{0: d.Partitions[0]}
			}
			got := replicaShortfall(dd, tc.partition, tc.minISR)
			if tc.want[0] == "" {
				if got != "" {
					t.Errorf("got %q, want nothing", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}
