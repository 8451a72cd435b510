package kafkatopic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/kafkatopic"
)

func admin(t *testing.T) *kadm.Client {
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
	return kadm.NewClient(cl)
}

func TestCreateWaitsForLeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := admin(t)
	if err := kafkatopic.Create(ctx, adm, 3, "a", "b"); err != nil {
		t.Fatal(err)
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
	adm := admin(t)
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
