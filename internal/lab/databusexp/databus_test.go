package databusexp

import (
	"testing"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
)

// TestExperimentQuick runs the experiment for real in quick mode, its runs
// shortened (gateways under quota, kfake, 21,000 idle streams), and
// checks its rows; whether the claims hold is the lab's verdict, not the
// test's.
func TestExperimentQuick(t *testing.T) {
	if raceEnabled {
		t.Skip("runs without -race: 21,000 streams under the race detector take minutes")
	}
	res := labtest.RunQuick(t, New())
	rows := map[string]*lab.Row{}
	for _, r := range res.Rows {
		rows[r.Label] = r
	}
	for _, n := range echoClients {
		r := rows[echoLabel(n)]
		if r == nil || r.RPS == nil || *r.RPS <= 0 || r.Ref == nil || r.Ref.RPS == nil || r.P99MS == nil {
			t.Errorf("echo row for %d clients: %+v", n, r)
		}
	}
	for _, label := range []string{pubLabel(latencyOpt, false), pubLabel(latencyOpt, true), pubLabel(throughputOpt, false), pubLabel(throughputOpt, true), smallLabel(false), smallLabel(true), subscribeRow} {
		r := rows[label]
		if r == nil || r.RPS == nil || *r.RPS <= 0 {
			t.Errorf("row %q: %+v", label, r)
			continue
		}
		if r.Lost != nil && *r.Lost != 0 {
			t.Errorf("row %q lost %v messages", label, *r.Lost)
		}
	}
	for _, label := range []string{pubLabel(latencyOpt, false), pubLabel(latencyOpt, true), smallLabel(false), smallLabel(true), pubLabel(throughputOpt, false)} {
		if r := rows[label]; r != nil && r.Lost == nil {
			t.Errorf("row %q was not verified", label)
		}
	}
	for _, label := range []string{costGatewayLabel, directLabel} {
		if r := rows[label]; r == nil || r.RPS == nil || *r.RPS <= 0 || r.CPUAvg == nil || *r.CPUAvg <= 0 || len(r.PerRun) != 2 {
			t.Errorf("publish cost row %q: %+v", label, r)
		}
	}
	if r := rows[costGatewayLabel]; r != nil && r.Figures["cpu_ratio_to_direct"] <= 0 {
		t.Errorf("no CPU ratio of the gateway to the direct producer: %v", r.Figures)
	}
	if r := rows[subscribeRow]; r != nil && r.Figures["cycles_per_s"] <= 0 {
		t.Errorf("no get-ack cycles: %+v", r.Figures)
	} else if r != nil && r.CPUAvg != nil && (r.Figures["cycles_per_gateway_cpu_s"] <= 0 || r.Figures["msgs_per_gateway_cpu_s"] <= 0 || r.Runs < 2 || len(r.PerRun) != r.Runs) {
		t.Errorf("subscribe row: %d drains (%d kept), figures %+v: want rounds (labtest's --pairs), each per gateway CPU-second", r.Runs, len(r.PerRun), r.Figures)
	}
	for _, label := range []string{echoBaseLabel, echoNoMetricsLabel, echoTwoProcsLabel} {
		if r := rows[label]; r == nil || r.RPS == nil || *r.RPS <= 0 || r.CPUAvg == nil || len(r.PerRun) != 2 {
			t.Errorf("echo scaling row %q: %+v", label, r)
		}
	}
	if r := rows[echoTwoProcsLabel]; r != nil && r.Figures["ratio_to_gomaxprocs_1"] <= 0 {
		t.Errorf("no GOMAXPROCS ratio: %v", r.Figures)
	}
	if r := rows[echoNoMetricsLabel]; r != nil {
		if _, ok := r.Figures["metrics_cost_pct"]; !ok {
			t.Errorf("no metrics cost: %v", r.Figures)
		}
	}
	quick := lab.Options{Mode: lab.Quick}
	verified := []string{tickerLabel(1000, false), tickerLabel(1000, true), tickerLabel(10000, true),
		idleTimeoutLabel(shortIdle), idleTimeoutLabel(gateway.DefaultConnIdleTimeout),
		fetchLabel(quick, fetchSmall), fetchLabel(quick, fetchLarge)}
	for _, d := range processDelays {
		verified = append(verified, delayLabel(d))
	}
	for _, label := range verified {
		r := rows[label]
		switch {
		case r == nil || r.RPS == nil || *r.RPS <= 0:
			t.Errorf("row %q: %+v", label, r)
		case r.Lost == nil || *r.Lost != 0:
			t.Errorf("row %q: lost %v, want 0 and verified", label, r.Lost)
		}
	}
	for _, label := range []string{tickerLabel(1000, false), tickerLabel(10000, true), idleTimeoutLabel(shortIdle)} {
		if r := rows[label]; r != nil && (r.P99MS == nil || r.MaxMS == nil) {
			t.Errorf("ticker row %q has no latency", label)
		}
	}
	if r := rows[idleTimeoutLabel(shortIdle)]; r != nil && r.Figures[dialSeries.Key] <= 0 {
		t.Errorf("no Kafka dials counted: %v", r.Figures)
	}
	if r := rows[fetchLabel(quick, fetchLarge)]; r != nil && (r.RSSMBMax == nil || r.Figures["rss_ratio_to_32kib"] <= 0) {
		t.Errorf("fetch row: RSS %v, figures %v", r.RSSMBMax, r.Figures)
	}
	for _, label := range []string{idleLabel(1000, 1000), idleLabel(10000, 10000), idleLabel(10000, 1000)} {
		r := rows[label]
		if r == nil || r.Figures["rss_kb_per_stream"] <= 0 || r.RSSMBAvg == nil {
			t.Errorf("idle row %q: %+v", label, r)
		}
	}
	for _, label := range faultLabels {
		r := rows[label]
		switch {
		case r == nil:
			t.Errorf("fault row %q missing", label)
		case r.Lost == nil || *r.Lost != 0 || r.Figures["faults"] < 1 || r.Figures["acked"] <= 0:
			t.Errorf("fault row %q: lost %v, %v faults, %v acked", label, r.Lost, r.Figures["faults"], r.Figures["acked"])
		}
	}
	if len(res.Claims) != 4 {
		t.Fatalf("%d claims, want 4", len(res.Claims))
	}
	for _, c := range res.Claims {
		if c.Ratio == nil || c.Pairs != 2 || c.Verdict == lab.Invalid {
			t.Errorf("claim %q: ratio %v over %d pairs, %s (%s)", c.Claim, c.Ratio, c.Pairs, c.Verdict, c.Why)
		}
	}
	if res.Env["kafka"] == "" || res.Env["gateway"] == "" {
		t.Errorf("environment not recorded: %v", res.Env)
	}
	t.Logf("first claim %s, ratio %.2f; took %.0f s", res.Verdict, *res.Ratio, res.Seconds)
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 75202: "75,202", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
