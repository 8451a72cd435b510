package deps

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRenderKafkaProps(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string
		not     []string
	}{
		{"", []string{"# Written by hlab: a single-node KRaft Kafka " + DefaultKafkaVersion + " (broker and controller in one)."}, nil},
		{"3.9.2", nil, []string{"share.coordinator"}},
		{"4.3.1", []string{"share.coordinator.state.topic.replication.factor=1"}, nil},
	} {
		t.Run("version="+tc.version, func(t *testing.T) {
			b, err := RenderKafkaProps(tc.version, 9092, 9093, "/k", 6)
			if err != nil {
				t.Fatal(err)
			}
			props := string(b)
			want := append([]string{
				"process.roles=broker,controller", "node.id=1",
				"controller.quorum.voters=1@127.0.0.1:9093",
				"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
				"advertised.listeners=PLAINTEXT://127.0.0.1:9092",
				"controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
				"log.dirs=/k/data", "num.partitions=6",
				"offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
				"transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0",
				"auto.create.topics.enable=false",
			}, tc.want...)
			for _, w := range want {
				if !strings.Contains(props, w+"\n") {
					t.Errorf("server.properties lacks %q:\n%s", w, props)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(props, n) {
					t.Errorf("server.properties has %q:\n%s", n, props)
				}
			}
		})
	}
	if _, err := RenderKafkaProps("4.4.0", 1, 2, "/k", 1); err == nil || !strings.Contains(err.Error(), "3.9.2, 4.3.1") {
		t.Errorf("unknown version: %v, want an error listing the known ones", err)
	}
}

func TestParseKafkaKind(t *testing.T) {
	for in, want := range map[string]KafkaKind{"": KafkaFake, "kfake": KafkaFake, "Embedded": KafkaFake, "real": KafkaReal, " kafka ": KafkaReal} {
		if got, err := ParseKafkaKind(in); err != nil || got != want {
			t.Errorf("ParseKafkaKind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseKafkaKind("redpanda"); err == nil {
		t.Error("ParseKafkaKind(redpanda): want an error")
	}
}

func TestKafkaUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := kafkaUUID()
		if len(id) != 22 || id[0] == '-' || seen[id] {
			t.Fatalf("kafkaUUID() = %q: want 22 characters of URL-safe base64, not starting with '-', unique", id)
		}
		seen[id] = true
	}
}

func TestJavaMajor(t *testing.T) {
	for v, want := range map[string]int{"17.0.15": 17, "1.8.0_292": 8, "21": 21, "11.0.2-ea": 11, "unknown": 0, "": 0} {
		if got := javaMajor(v); got != want {
			t.Errorf("javaMajor(%q) = %d, want %d", v, got, want)
		}
	}
	if err := checkJava("11.0.2", 17, "kafka 4.3.1"); err == nil {
		t.Error("java 11 for kafka 4.3.1: want an error")
	}
}

// TestKafkaMissingTools checks that a machine without java or mvn gets an
// error that says what to install, not a failed exec.
func TestKafkaMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("HLAB_CACHE", t.TempDir())
	if _, err := FetchKafka(context.Background(), "", nil); !errors.Is(err, ErrMavenNotInstalled) {
		t.Errorf("FetchKafka without mvn = %v, want ErrMavenNotInstalled", err)
	}
	sb := testSandbox(t)
	_, err := StartKafka(context.Background(), sb, KafkaConfig{Kind: KafkaReal})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y openjdk-17-jre-headless maven") {
		t.Errorf("StartKafka without java = %v, want an error saying what to install", err)
	}
	if s, err := CheckKafka(""); err != nil || s.Cached || s.Ready() || !errors.Is(s.JavaErr, ErrJavaNotInstalled) || !errors.Is(s.MavenErr, ErrMavenNotInstalled) {
		t.Errorf("CheckKafka = %+v, %v: want nothing cached, java and mvn missing", s, err)
	}
}

// TestKafkaFakeSeedsTopics checks the kfake path of KafkaConfig.Topics and
// Partitions, and that a stopped kfake cannot be started again.
func TestKafkaFakeSeedsTopics(t *testing.T) {
	ctx := context.Background()
	k, err := StartKafka(ctx, nil, KafkaConfig{Topics: []string{"a", "b"}, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if k.Kind != "kfake (embedded)" || !k.Embedded || len(k.Brokers) != 1 || k.Proc() != nil {
		t.Errorf("kfake: Kind %q, Embedded %v, Brokers %v, Proc %v", k.Kind, k.Embedded, k.Brokers, k.Proc())
	}
	err = k.CreateTopics(ctx, 0, "a")
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("CreateTopics of a seeded topic = %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if err := k.CreateTopics(ctx, 0, "c"); err != nil {
		t.Fatal(err)
	}
	err = k.admin(func(adm *kadm.Client) error {
		td, err := adm.ListTopics(ctx, "a", "c")
		for _, topic := range []string{"a", "c"} {
			if n := len(td[topic].Partitions); err == nil && n != 3 {
				t.Errorf("topic %s has %d partitions, want KafkaConfig.Partitions (3)", topic, n)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteTopics(ctx, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := k.StartBroker(ctx); !errors.Is(err, ErrKafkaStopped) {
		t.Errorf("StartBroker after Stop = %v, want ErrKafkaStopped", err)
	}
}

func TestRenderKafkaClusterNode(t *testing.T) {
	layout := kafkaLayout{brokers: []int{9092, 9094, 9096}, controllerPort: 9093}
	single := kafkaLayout{brokers: []int{9092}, controllerPort: 9093}
	for _, tc := range []struct {
		what      string
		layout    kafkaLayout
		id        int
		want, not []string
	}{{
		what: "a cluster's broker", layout: layout, id: 2,
		want: []string{
			"# Written by hlab: broker 2 of a 3-broker KRaft Kafka " + DefaultKafkaVersion + ".",
			"process.roles=broker", "node.id=2",
			"controller.quorum.voters=4@127.0.0.1:9093",
			"listeners=PLAINTEXT://127.0.0.1:9094",
			"advertised.listeners=PLAINTEXT://127.0.0.1:9094",
			"log.dirs=/k/data",
			"default.replication.factor=3", "min.insync.replicas=2", "unclean.leader.election.enable=false",
			"offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3",
			"transaction.state.log.min.isr=2", "broker.session.timeout.ms=3000",
		},
	}, {
		what: "a cluster's controller", layout: layout, id: 4,
		want: []string{"process.roles=controller", "node.id=4", "listeners=CONTROLLER://127.0.0.1:9093"},
		not:  []string{"advertised.listeners"},
	}, {
		what: "a single node", layout: single, id: 1,
		want: []string{"default.replication.factor=1", "min.insync.replicas=1", "unclean.leader.election.enable=false"},
		// No peers to notice it gone.
		not: []string{"broker.session.timeout.ms"},
	}} {
		b, err := tc.layout.render("", tc.id, "/k", 6)
		if err != nil {
			t.Fatal(err)
		}
		props := string(b)
		for _, w := range tc.want {
			if !strings.Contains(props, w+"\n") {
				t.Errorf("%s: server.properties lacks %q:\n%s", tc.what, w, props)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(props, n) {
				t.Errorf("%s: server.properties has %q:\n%s", tc.what, n, props)
			}
		}
	}
}
