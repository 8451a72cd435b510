package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/eventlog/eventlogtest"
	"github.com/highload-lab/hlab/internal/testkit"
)

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"sync without event log", Config{}, "--eventlog"},
		{"sync with a bad URL", Config{EventLog: "127.0.0.1:80"}, "--eventlog"},
		{"async without brokers", Config{Mode: Async}, "--brokers"},
		{"kafka-ack without brokers", Config{Mode: KafkaAck}, "app: kafka-ack mode needs Kafka's brokers (--brokers"},
		{"databus without address", Config{Mode: Databus}, "--databus"},
		{"unknown mode", Config{Mode: "carrier-pigeon"}, `unknown mode "carrier-pigeon": use sync, async, kafka-ack or databus`},
		{"sync", Config{EventLog: "http://127.0.0.1:1"}, ""},
		{"kafka-ack", Config{Mode: KafkaAck, Brokers: []string{"127.0.0.1:9092"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			err := c.setDefaults()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Timeout != DefaultTimeout || c.Buffer != DefaultBuffer || c.Topic != eventlog.DefaultTopic {
					t.Fatalf("defaults not applied: %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w (3 events wait)", ErrBufferFull), "buffer_full"},
		{fmt.Errorf("%w: x", ErrKafkaUnreachable), "kafka_unreachable"},
		{fmt.Errorf("%w: x", ErrTimeout), "timeout"},
		{fmt.Errorf("%w: x", ErrUnreachable), "unreachable"},
		{&StatusError{Code: 500}, "status_500"},
		{&GatewayError{Code: codes.NotFound, Err: errors.New("no topic")}, "rejected_notfound"},
		{&KafkaError{Err: kerr.MessageTooLarge}, "rejected_message_too_large"},
		{produceError(kerr.UnknownTopicOrPartition, time.Second), "rejected_unknown_topic_or_partition"},
		{produceError(context.DeadlineExceeded, time.Second), "timeout"},
		{produceError(kgo.ErrRecordTimeout, time.Second), "timeout"},
		{produceError(kgo.ErrClientClosed, time.Second), "other"},
		{ErrTooManyInflight, "too_many_inflight"},
		{fmt.Errorf("%w: %w", ErrClientGone, ErrTimeout), "client_gone"},
		{errors.New("boom"), "other"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := Kind(tt.err); got != tt.want {
			t.Errorf("Kind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if err := produceError(nil, time.Second); err != nil {
		t.Errorf("an acknowledged produce is %v, want nil", err)
	}
	if got := Kind(gatewayError(context.Background(), status.Error(codes.Unavailable, "kafka down"))); got != "unreachable" {
		t.Errorf("a gateway's Unavailable is %q, want unreachable", got)
	}
}

// TestSync checks sync mode against a real event log and against each way
// the event log can fail: every failure is a 503 naming its kind, within
// the timeout.
func TestSync(t *testing.T) {
	el := httptest.NewServer(eventlog.Handler(prometheus.NewRegistry()))
	defer el.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "disk full", http.StatusInternalServerError)
	}))
	defer broken.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	tests := []struct {
		name        string
		eventlog    string
		drop        bool
		wantCode    int
		wantFailure string
		wantDropped string
	}{
		{"saved", el.URL, false, 200, "", ""},
		{"slow event log", slow.URL, false, 503, "timeout", ""},
		{"event log error", broken.URL, false, 503, "status_500", ""},
		{"event log down", goneURL, false, 503, "unreachable", ""},
		{"event log down, drop", goneURL, true, 200, "", "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t, Config{EventLog: tt.eventlog, Timeout: 300 * time.Millisecond, Drop: tt.drop})
			start := time.Now()
			got := get(a.URL + "/handle")
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v with a 300ms timeout", took)
			}
			if got.err != nil || got.code != tt.wantCode || got.failure != tt.wantFailure || got.dropped != tt.wantDropped {
				t.Fatalf("got %+v, want code %d failure %q dropped %q", got, tt.wantCode, tt.wantFailure, tt.wantDropped)
			}
			if tt.wantCode == 200 && tt.wantDropped == "" && got.id == "" {
				t.Fatal("no X-Event-Id on a recorded event")
			}
			if tt.wantFailure != "" {
				if n := a.metric(t, "app_event_errors_total"); n != 1 {
					t.Fatalf("app_event_errors_total = %v, want 1", n)
				}
			}
		})
	}
}

func TestMaxInflight(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer hold.Close()
	defer once.Do(func() { close(release) })
	a := startApp(t, Config{EventLog: hold.URL, MaxInflight: 1, Timeout: 5 * time.Second})
	first := make(chan answer, 1)
	go func() { first <- get(a.URL + "/handle") }()
	testkit.Eventually(t, 5*time.Second, "the first request in flight", func() bool { return a.metric(t, "app_inflight_requests") == 1 })
	if got := get(a.URL + "/handle"); got.code != 503 || got.failure != "too_many_inflight" {
		t.Fatalf("second request = %+v, want 503 too_many_inflight", got)
	}
	once.Do(func() { close(release) })
	if got := <-first; got.code != 200 {
		t.Fatalf("first request = %+v, want 200", got)
	}
}

// TestAsyncNotReadyWithoutTopic checks that the app refuses events while
// its topic does not exist, instead of accepting events Kafka would fail.
func TestAsyncNotReadyWithoutTopic(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	a := startApp(t, Config{Mode: Async, Brokers: k.Brokers, Topic: "no-such-topic-" + depstest.Name(t)})
	time.Sleep(300 * time.Millisecond)
	if err := a.Ready(); err == nil {
		t.Fatal("ready without the topic")
	}
	if got := get(a.URL + "/handle"); got.code != 503 || got.failure != "kafka_unreachable" {
		t.Fatalf("got %+v, want 503 kafka_unreachable", got)
	}
	if n := a.metric(t, "app_events_lost_total"); n != 0 {
		t.Fatalf("lost %v events", n)
	}
}

// TestAsyncBufferBound checks the bound on memory with Kafka gone: the
// app accepts Buffer events, refuses the next with buffer_full, refuses
// everything with kafka_unreachable once the deadline passed, and delivers
// what it accepted when Kafka is back.
func TestAsyncBufferBound(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := depstest.Topic(t, k, 1)
	a := startApp(t, Config{Mode: Async, Brokers: k.Brokers, Topic: topic, Buffer: 3, KafkaDeadline: 500 * time.Millisecond})
	testkit.Eventually(t, 10*time.Second, "the app ready", func() bool { return a.Ready() == nil })
	if got := get(a.URL + "/handle"); got.code != 200 {
		t.Fatalf("with Kafka up: %+v", got)
	}
	testkit.Eventually(t, 10*time.Second, "the first event delivered", func() bool { return a.metric(t, "app_events_delivered_total") == 1 })

	depstest.StopBroker(t, k)
	var ids []string
	for range 3 {
		got := get(a.URL + "/handle")
		if got.code != 200 {
			t.Fatalf("buffering with Kafka down: %+v", got)
		}
		ids = append(ids, got.id)
	}
	if got := get(a.URL + "/handle"); got.code != 503 || got.failure != "buffer_full" {
		t.Fatalf("4th event with a buffer of 3: %+v, want 503 buffer_full", got)
	}
	testkit.Eventually(t, 5*time.Second, "kafka counted unreachable", func() bool { return a.metric(t, "app_kafka_unreachable") == 1 })
	if got := get(a.URL + "/handle"); got.code != 503 || got.failure != "kafka_unreachable" {
		t.Fatalf("after the deadline: %+v, want 503 kafka_unreachable", got)
	}
	if n := a.metric(t, "app_events_pending"); n != 3 {
		t.Fatalf("app_events_pending = %v, want 3", n)
	}
	depstest.StartBroker(t, k)
	testkit.Eventually(t, 30*time.Second, "the buffered events delivered", func() bool {
		return a.metric(t, "app_events_pending") == 0 && a.metric(t, "app_events_delivered_total") == 4
	})
	if got := get(a.URL + "/handle"); got.code != 200 {
		t.Fatalf("with Kafka back: %+v", got)
	}
	if n := a.metric(t, "app_kafka_errors_total"); n == 0 {
		t.Error("no broker errors counted during the outage")
	}
	tr := eventlogtest.NewTracker()
	eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Group: depstest.Group(t), Processed: tr.Add})
	testkit.Eventually(t, 20*time.Second, "the buffered events consumed", func() bool { return tr.Has(ids) })
}

// TestEndToEnd records events in async mode and through the databus
// gateway, against kfake and the real broker, and checks each answered
// id is consumed.
func TestEndToEnd(t *testing.T) {
	for _, kind := range deps.KafkaKinds {
		for _, mode := range []Mode{Async, Databus} {
			t.Run(string(kind)+"/"+string(mode), func(t *testing.T) {
				k := depstest.Kafka(t, kind)
				topic := depstest.Topic(t, k, 1)
				cfg := Config{Mode: mode, Brokers: k.Brokers, Topic: topic}
				if mode == Databus {
					cfg.Databus = gatewaytest.Start(t, gateway.Config{Brokers: k.Brokers}, gateway.ServerOptions{})
				}
				a := startApp(t, cfg)
				testkit.Eventually(t, 15*time.Second, "the app ready", func() bool { return a.Ready() == nil })
				tr := eventlogtest.NewTracker()
				eventlogtest.Start(t, eventlog.ConsumerConfig{Brokers: k.Brokers, Topic: topic, Group: depstest.Group(t), Processed: tr.Add})
				var ids []string
				for range 50 {
					got := get(a.URL + "/handle")
					if got.code != 200 || got.id == "" {
						t.Fatalf("GET /handle: %+v", got)
					}
					ids = append(ids, got.id)
				}
				testkit.Eventually(t, 30*time.Second, "every event consumed", func() bool { return tr.Has(ids) })
				if n := a.metric(t, "app_events_delivered_total"); n != 50 {
					t.Fatalf("app_events_delivered_total = %v, want 50", n)
				}
			})
		}
	}
}
