package databusexp

import (
	"os"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/labresult"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

func TestSpec(t *testing.T) {
	labtest.SpecValid(t, New())
	for _, o := range []lab.Options{{Kafka: lab.KafkaReal}, {Mode: lab.Full, Kafka: lab.KafkaReal}, {Kafka: lab.KafkaExternal}} {
		spec := New().Spec(o)
		if err := spec.Validate(); err != nil {
			t.Errorf("%s mode, kafka %s: %v", o.Mode, o.Kafka, err)
		}
	}
}

// TestExperimentQuick runs the experiment for real in quick mode, its runs
// shortened (gateways under quota, kfake, 21,000 idle streams): every
// row of its Spec measured, every claim's ratio and target's value read,
// and the rows' own figures there; whether the claims hold is the lab's
// verdict, not the test's.
func TestExperimentQuick(t *testing.T) {
	if raceEnabled {
		t.Skip("runs without -race: 21,000 streams under the race detector take minutes")
	}
	res := labtest.RunQuick(t, New())
	rows := map[labresult.Key]*labresult.Row{}
	for _, r := range res.Rows {
		rows[r.Key] = r
	}
	for _, n := range echoClients {
		r := rows[echoKey(n)]
		if r == nil || r.RPS == nil || *r.RPS <= 0 || r.Ref == nil || r.Ref.RPS == nil || r.P99MS == nil || r.Get(ratioToReportPerCore) == nil {
			t.Errorf("echo row for %d clients: %+v", n, r)
		}
	}
	for _, k := range []labresult.Key{pubKey(latencyOpt, false), pubKey(latencyOpt, true), pubKey(throughputOpt, false), pubKey(throughputOpt, true), smallKey(false), smallKey(true), pipelinedKey(false), pipelinedKey(true), subscribeKey} {
		r := rows[k]
		if r == nil || r.RPS == nil || *r.RPS <= 0 {
			t.Errorf("row %q: %+v", k, r)
			continue
		}
		if r.Lost != nil && *r.Lost != 0 {
			t.Errorf("row %q lost %v messages", k, *r.Lost)
		}
	}
	for _, k := range []labresult.Key{pubKey(latencyOpt, false), pubKey(latencyOpt, true), smallKey(false), smallKey(true), pipelinedKey(false), pipelinedKey(true), pubKey(throughputOpt, false)} {
		if r := rows[k]; r != nil && (r.Lost == nil || r.Get(gatewayCPUPerMsg) == nil) {
			t.Errorf("row %q: lost %v (want verified), figures %v (want the gateway's CPU per message)", k, r.Lost, r.Figures)
		}
	}
	for _, k := range []labresult.Key{costGatewayAtRate, costDirectAtRate} {
		if r := rows[k]; r == nil || r.RPS == nil || *r.RPS <= 0 || r.CPUAvg == nil || *r.CPUAvg <= 0 || len(r.PerRun) != 2 || r.Value(recordsPerProduce) <= 0 {
			t.Errorf("publish cost row %q: %+v (want its records per produce request among its figures)", k, r)
		}
	}
	if r := rows[subscribeKey]; r != nil && r.Value(cyclesPerS) <= 0 {
		t.Errorf("no get-ack cycles: %+v", r.Figures)
	} else if r != nil && r.CPUAvg != nil && (r.Value(cyclesPerGatewayCPU) <= 0 || r.Value(msgsPerGatewayCPU) <= 0 || r.Runs < 2 || len(r.PerRun) != r.Runs) {
		t.Errorf("subscribe row: %d drains (%d kept), figures %+v: want rounds (labtest's --pairs), each per gateway CPU-second", r.Runs, len(r.PerRun), r.Figures)
	}
	if r := rows[subscribeDirectKey]; r == nil || r.Value(consumerCPUPerMsg) <= 0 || r.Lost == nil || *r.Lost != 0 || len(r.PerRun) != 2 {
		t.Errorf("direct consumer row: %+v: want its CPU per message in each round, every record received", r)
	}
	for _, k := range []labresult.Key{echoBase, echoFloor, echoNoMetrics, echoTwoProcs} {
		if r := rows[k]; r == nil || r.RPS == nil || *r.RPS <= 0 || r.CPUAvg == nil || len(r.PerRun) != 2 {
			t.Errorf("echo scaling row %q: %+v", k, r)
		}
	}
	verified := []labresult.Key{fetchSmallKey, fetchLargeKey}
	for _, tr := range tickerRows {
		verified = append(verified, tickerKey(tr))
	}
	for _, d := range idleTimeouts {
		verified = append(verified, idleTimeoutKey(d))
	}
	for _, d := range processDelays {
		verified = append(verified, delayKey(d))
	}
	for _, k := range verified {
		r := rows[k]
		switch {
		case r == nil || r.RPS == nil || *r.RPS <= 0:
			t.Errorf("row %q: %+v", k, r)
		case r.Lost == nil || *r.Lost != 0:
			t.Errorf("row %q: lost %v, want 0 and verified", k, r.Lost)
		}
	}
	for _, k := range []labresult.Key{tickerKey(tickerOff), tickerKey(tickerQuiet), idleTimeoutKey(shortIdle)} {
		if r := rows[k]; r != nil && (r.P99MS == nil || r.MaxMS == nil) {
			t.Errorf("ticker row %q has no latency", k)
		}
	}
	if r := rows[idleTimeoutKey(shortIdle)]; r != nil && r.Value(kafkaDials) <= 0 {
		t.Errorf("no Kafka dials counted: %v", r.Figures)
	}
	for _, s := range idleShapes {
		if r := rows[idleKey(s)]; r == nil || r.Value(rssKBPerStream) <= 0 || r.RSSMBAvg == nil {
			t.Errorf("idle row %q: %+v", idleKey(s), r)
		} else if floored(s) && r.Get(rssKBOverFloor) == nil {
			t.Errorf("idle row %q: no figure against the floor's: %v", idleKey(s), r.Figures)
		}
		if !floored(s) {
			continue
		}
		if r := rows[idleFloorKey(s)]; r == nil || r.Value(rssKBPerStream) <= 0 {
			t.Errorf("idle floor row %q: %+v", idleFloorKey(s), r)
		}
	}
	for _, cr := range compressionRows(lab.Options{Mode: lab.Quick}) {
		r := rows[compressionKey(cr)]
		switch {
		case r == nil || r.RPS == nil || *r.RPS <= 0:
			t.Errorf("compression row %q: %+v", compressionKey(cr), r)
		case r.Value(kafkaRawBytesPerMsg) < recordBytes+28 || r.Value(kafkaBytesPerMsg) <= 0 || r.Value(compressionRatio) > 1 || r.Get(gatewayCPUPerMsg) == nil:
			// Every record holds its value and the checker's header; a
			// codec never sends more than the records (franz-go sends the
			// smaller).
			t.Errorf("compression row %q: figures %v", compressionKey(cr), r.Figures)
		}
	}
	for _, n := range topicsCounts {
		if r := rows[topicsKey(n)]; r == nil || r.RPS == nil || *r.RPS <= 0 || r.Get(gatewayCPUPerMsg) == nil {
			t.Errorf("topics row %q: %+v", topicsKey(n), r)
		}
	}
	for _, k := range faultKeys {
		r := rows[k]
		switch {
		case r == nil:
			t.Errorf("fault row %q missing", k)
		case r.Lost == nil || *r.Lost != 0 || r.Value(faultsInjected) < 1 || r.Acked == nil || *r.Acked <= 0:
			t.Errorf("fault row %q: lost %v, %v faults, %v acked", k, r.Lost, r.Value(faultsInjected), r.Acked)
		}
	}
	if len(res.Claims) != 4 {
		t.Fatalf("%d claims, want 4", len(res.Claims))
	}
	for _, c := range res.Claims {
		if c.Ratio == nil || c.Pairs != 2 || c.Verdict == labresult.Invalid {
			t.Errorf("claim %q: ratio %v over %d pairs, %s (%s)", c.Claim, c.Ratio, c.Pairs, c.Verdict, c.Why)
		}
	}
	for _, tr := range append(res.Targets, res.Ratios...) {
		if (tr.Key == "publish-cost-cpu-per-msg" || tr.Key == "echo-over-grpc-floor-per-cpu") && (tr.Pairs != 2 || tr.Spread == nil) {
			t.Errorf("target %q: %d pairs, spread %v: want the rounds paired, with an interval", tr.Key, tr.Pairs, tr.Spread)
		}
		if tr.Key == "subscribe-cost-cpu-per-msg" && (tr.Pairs != 2 || tr.Spread == nil) {
			t.Errorf("subscribe cost target: %d pairs, spread %v: want the drains paired, with an interval", tr.Pairs, tr.Spread)
		}
		if tr.Value != nil {
			t.Logf("%s: %.4g %s, spread %v, %s %s", tr.Key, *tr.Value, tr.Unit, tr.Spread, tr.Bound, tr.Verdict)
		}
	}
	if res.Env["kafka"] == "" || res.Env["gateway"] == "" {
		t.Errorf("environment not recorded: %v", res.Env)
	}
	t.Logf("first claim %s, ratio %.2f; %s; took %.0f s", res.Verdict, *res.Ratio, labresult.Summary(res), res.Seconds)
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 75202: "75,202", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// target returns the Spec's target key with o.
func target(t *testing.T, o lab.Options, key labresult.Key) labresult.Target {
	t.Helper()
	for _, tg := range New().Spec(o).Targets {
		if tg.Key == key {
			return tg
		}
	}
	t.Fatalf("no target %q", key)
	return labresult.Target{}
}

// TestClusterRowsOnlyWithRealKafka: the cluster fault rows and their
// targets are declared with --kafka real only, so the default quick run
// starts no cluster.
func TestClusterRowsOnlyWithRealKafka(t *testing.T) {
	for _, tc := range []struct {
		o    lab.Options
		want bool
	}{{lab.Options{}, false}, {lab.Options{Kafka: lab.KafkaReal}, true}, {lab.Options{Kafka: lab.KafkaExternal}, false}} {
		spec := New().Spec(tc.o)
		rows, targets := 0, 0
		for _, r := range spec.Rows {
			if strings.HasPrefix(string(r.Key), "fault/cluster/") {
				rows++
			}
		}
		for _, tg := range spec.Targets {
			if strings.HasPrefix(string(tg.Row), "fault/cluster/") && tg.Metric == labresult.Lost.Name {
				targets++
			}
		}
		if want := btoi(tc.want) * 4; rows != want || targets != want {
			t.Errorf("kafka %q: %d cluster rows, %d lost targets; want %d of each", tc.o.Kafka, rows, targets, want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
