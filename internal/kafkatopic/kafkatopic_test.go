package kafkatopic_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/highload-lab/hlab/internal/kafkatopic"
)

func admin(t *testing.T) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, kadm.NewClient(cl)
}

// leaderless makes c answer the next n metadata requests that name topic
// with its partitions leaderless (LEADER_NOT_AVAILABLE), as a KRaft broker
// does just after CreateTopics; it returns how many it answered so.
func leaderless(c *kfake.Cluster, topic string, n int) *atomic.Int32 {
	var served atomic.Int32
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		named := false
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			named = named || (rt.Topic != nil && *rt.Topic == topic)
		}
		if !named || served.Load() >= int32(n) {
			return nil, nil, false
		}
		served.Add(1)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(topic)
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Leader, p.ErrorCode = -1, kerr.LeaderNotAvailable.Code
		rt.Partitions = append(rt.Partitions, p)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	return &served
}

func TestCreateWaitsForLeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, adm := admin(t)
	served := leaderless(c, "a", 2)
	if err := kafkatopic.Create(ctx, adm, 3, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if n := served.Load(); n != 2 {
		t.Errorf("Create returned after %d of the broker's 2 leaderless answers: it did not wait for the leaders", n)
	}
	details, err := adm.ListTopics(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"a", "b"} {
		d := details[topic]
		if len(d.Partitions) != 3 {
			t.Errorf("topic %s: %d partitions, want 3", topic, len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader < 0 {
				t.Errorf("topic %s partition %d has no leader after Create returned", topic, p.Partition)
			}
		}
	}
	if err := kafkatopic.Create(ctx, adm, 3, "a"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("Create of an existing topic = %v, want TOPIC_ALREADY_EXISTS", err)
	}
}

func TestAwaitNamesTheMissingTopic(t *testing.T) {
	_, adm := admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafkatopic.Create(ctx, adm, 1, "here"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	err := kafkatopic.Await(short, adm, "here", "never-created")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"never-created"`) {
		t.Errorf("Await of a missing topic = %v, want a deadline error naming it", err)
	}
}
