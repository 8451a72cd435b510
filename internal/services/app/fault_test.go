package app

import (
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/eventlog/eventlogtest"
	"github.com/highload-lab/hlab/internal/testkit"
)

// The fault tests' load: workers × one request per interval (~200 req/s).
const (
	faultWorkers  = 4
	faultInterval = 20 * time.Millisecond
	faultBuffer   = 300
)

// TestBrokerOutageUnderLoad stops the broker for 10 s while the app is
// under load (report A2's async mode), with a consumer running throughout.
// The app must stay up, its memory bounded (at most faultBuffer events
// wait, and the heap stays small), and every request must be either
// answered 200 with an event that is later consumed, or refused with 503.
func TestBrokerOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s outage under load")
	}
	depstest.EachKafka(t, func(t *testing.T, k *deps.Kafka) {
		topic := depstest.Topic(t, k, 1)
		tr := eventlogtest.NewTracker()
		cons := eventlogtest.Start(t, eventlog.ConsumerConfig{
			Brokers: k.Brokers, Topic: topic, Group: depstest.Group(t), Processed: tr.Add,
			SessionTimeout: 6 * time.Second, CommitTimeout: 3 * time.Second,
		})
		a := startApp(t, Config{Mode: Async, Brokers: k.Brokers, Topic: topic, Buffer: faultBuffer, KafkaDeadline: 2 * time.Second})
		testkit.Eventually(t, 15*time.Second, "the app ready", func() bool { return a.Ready() == nil })

		heap := sampleHeap()
		var pendingMax float64
		stopPending := make(chan struct{})
		pendingDone := make(chan struct{})
		go func() {
			defer close(pendingDone)
			for {
				pendingMax = max(pendingMax, a.metric(t, "app_events_pending"))
				select {
				case <-stopPending:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		l := startLoad(a.URL, faultWorkers, faultInterval)
		time.Sleep(2 * time.Second)
		okBefore, _ := l.counts()
		outage := time.Now()
		depstest.Outage(t, k, 10*time.Second)
		t.Logf("broker down and back in %v", time.Since(outage).Round(100*time.Millisecond))
		okDuring, failDuring := l.counts()
		healthz := get(a.URL + "/healthz")
		// The producer's way back (reconnect backoff, metadata, its
		// waiting events first) takes the real broker a few seconds,
		// more on a busy machine: wait for it, bounded, then load on.
		back := time.Now()
		for ok, _ := l.counts(); ok <= okDuring && time.Since(back) < 30*time.Second; ok, _ = l.counts() {
			time.Sleep(50 * time.Millisecond)
		}
		recovery := time.Since(back)
		time.Sleep(3 * time.Second) // load after the outage
		l.finish()
		close(stopPending)
		<-pendingDone

		testkit.Eventually(t, 60*time.Second, "every accepted event stored in Kafka", func() bool {
			return a.metric(t, "app_events_pending") == 0
		})
		heapMax := heap.Stop()
		if healthz.err != nil || healthz.code != 200 {
			t.Errorf("the app's /healthz after the outage: %+v", healthz)
		}
		if len(l.odd) > 0 {
			t.Errorf("%d answers neither 200 with an event id nor 503 with a reason, e.g. %s", len(l.odd), l.odd[0])
		}
		ok, failed := l.counts()
		testkit.Eventually(t, 90*time.Second, "every event answered 200 consumed", func() bool {
			return tr.Has(l.ok)
		})
		unique, dups := tr.Duplicates()
		t.Logf("requests: %d ok (%d before the outage, %d by its end), %d refused with 503 %v; events produced %v, consumed %d (unique), duplicates %d (consumer's own count %v), lost %v; pending max %v (bound %d), heap max %.1f MB; app's kafka errors %v",
			ok, okBefore, okDuring, failed, l.fail, a.metric(t, "app_events_delivered_total"), unique, dups,
			testkit.MetricSum(t, cons.Reg, "eventlog_consumer_duplicates_total", nil), a.metric(t, "app_events_lost_total"),
			pendingMax, faultBuffer, heapMax, a.metric(t, "app_kafka_errors_total"))
		if failDuring == 0 {
			t.Error("no request was refused during a 10 s outage: the bound was not exercised")
		}
		if ok <= okDuring {
			t.Error("no request succeeded within 30 s of the broker coming back")
		} else {
			t.Logf("the first request answered 200 %v after the broker came back", recovery.Round(100*time.Millisecond))
		}
		if pendingMax > faultBuffer {
			t.Errorf("%v events waited at once, over the bound of %d", pendingMax, faultBuffer)
		}
		if heapMax > 128 {
			t.Errorf("the test process's heap reached %.1f MB", heapMax)
		}
		if n := a.metric(t, "app_events_lost_total"); n != 0 {
			t.Errorf("app_events_lost_total = %v", n)
		}
		if d := a.metric(t, "app_events_delivered_total"); int(d) != ok {
			t.Errorf("app_events_delivered_total = %v, %d answered 200", d, ok)
		}
	})
}

// TestConsumerRestartMidStream restarts the consumer while the app keeps
// producing: gracefully (it commits what it processed and leaves the
// group) and by SIGKILL (a crash: what it processed after its last commit
// is delivered again). No event answered 200 may be lost; duplicates are
// counted and allowed.
func TestConsumerRestartMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a consumer under load")
	}
	for _, kind := range deps.KafkaKinds {
		for _, how := range []string{"graceful", "crash"} {
			t.Run(string(kind)+"/"+how, func(t *testing.T) {
				k := depstest.Kafka(t, kind)
				topic := depstest.Topic(t, k, 1)
				group := depstest.Group(t)
				a := startApp(t, Config{Mode: Async, Brokers: k.Brokers, Topic: topic})
				testkit.Eventually(t, 15*time.Second, "the app ready", func() bool { return a.Ready() == nil })

				first := eventlogtest.NewTracker()
				var stopFirst func()
				l := startLoad(a.URL, faultWorkers, faultInterval)
				if how == "crash" {
					// A backlog first, so the helper polls a batch of
					// hundreds and is killed in its middle, before its
					// commit.
					testkit.Eventually(t, 30*time.Second, "a backlog of 300 events", func() bool { ok, _ := l.counts(); return ok >= 300 })
					stopFirst = startHelperConsumer(t, k.Brokers, topic, group, first)
					testkit.Eventually(t, 30*time.Second, "the first consumer processing", func() bool { return first.Total() >= 100 })
				} else {
					c := eventlogtest.Start(t, eventlog.ConsumerConfig{
						Brokers: k.Brokers, Topic: topic, Group: group, Processed: first.Add, SessionTimeout: 6 * time.Second,
					})
					stopFirst = func() { c.Stop() } // a graceful stop; the test's end checks Run's error
					testkit.Eventually(t, 30*time.Second, "the first consumer processing", func() bool { return first.Total() >= 200 })
				}
				stopFirst()
				stoppedAt := first.Total()
				second := eventlogtest.NewTracker()
				secondC := eventlogtest.Start(t, eventlog.ConsumerConfig{
					Brokers: k.Brokers, Topic: topic, Group: group, Processed: second.Add, SessionTimeout: 6 * time.Second,
				})
				time.Sleep(3 * time.Second) // the stream goes on
				l.finish()
				if len(l.odd) > 0 || len(l.fail) > 0 {
					t.Fatalf("with Kafka up: %d failed %v, %d odd answers %v", len(l.fail), l.fail, len(l.odd), l.odd)
				}
				testkit.Eventually(t, 60*time.Second, "every accepted event stored in Kafka", func() bool {
					return a.metric(t, "app_events_pending") == 0
				})
				testkit.Eventually(t, 90*time.Second, "every event answered 200 consumed by one of the consumers", func() bool {
					return eventlogtest.Merged(first, second).Has(l.ok)
				})
				unique, dups := eventlogtest.Merged(first, second).Duplicates()
				t.Logf("%s restart: %d requests ok; events produced %v, consumed %d (unique) = %d by the first consumer before it stopped + %d by the second; duplicates %d (processed by the first but not committed, so delivered again to the second)",
					how, len(l.ok), a.metric(t, "app_events_delivered_total"), unique, stoppedAt, second.Total(), dups)
				if how == "crash" && dups == 0 {
					t.Error("no event was delivered twice after a crash in the middle of an uncommitted batch: the redelivery path was not exercised")
				}
				if unique != len(l.ok) {
					t.Errorf("%d unique events consumed, %d answered 200", unique, len(l.ok))
				}
				if n := testkit.MetricSum(t, secondC.Reg, "eventlog_consumer_duplicates_total", nil); n != 0 {
					t.Errorf("the second consumer recognized %v duplicates within its own life", n)
				}
			})
		}
	}
}
