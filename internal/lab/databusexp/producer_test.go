package databusexp

import (
	"math"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

func TestParsePerfSummary(t *testing.T) {
	// ProducerPerformance's output: a line every 5 s, then the summary.
	out := `249511 records sent, 49892.2 records/sec (4.76 MB/sec), 2.3 ms avg latency, 202.0 ms max latency.
log4j:WARN No appenders could be found for logger (org.apache.kafka.clients.producer.ProducerConfig).
1000000 records sent, 180375.180375 records/sec (17.20 MB/sec), 103.55 ms avg latency, 366.00 ms max latency, 95 ms 50th, 183 ms 95th, 236 ms 99th, 353 ms 99.9th.
`
	got, err := parsePerfSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	want := perfResult{Records: 1000000, RecordsPerSec: 180375.180375, MBPerSec: 17.20, AvgMS: 103.55, MaxMS: 366, P50MS: 95, P95MS: 183, P99MS: 236, P999MS: 353}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	for name, bad := range map[string]string{
		"interval lines only": "249511 records sent, 49892.2 records/sec (4.76 MB/sec), 2.3 ms avg latency, 202.0 ms max latency.\n",
		"an error":            "org.apache.kafka.common.errors.TimeoutException: Topic t not present in metadata after 60000 ms.\n",
		"nothing sent":        "0 records sent, 0.0 records/sec (0.00 MB/sec), 0.00 ms avg latency, 0.00 ms max latency, 0 ms 50th, 0 ms 95th, 0 ms 99th, 0 ms 99.9th.\n",
	} {
		if _, err := parsePerfSummary(bad); err == nil {
			t.Errorf("%s: parsed %q without an error", name, bad)
		} else if name == "an error" && !strings.Contains(err.Error(), "TimeoutException") {
			t.Errorf("%s: the error does not quote the output: %v", name, err)
		}
	}
}

// TestPublishCostTarget: the publish cost's target reads the gateway's
// CPU per message over the direct producer's, each run's at the same
// offered rate, paired by round (not by position), and judges their
// interval against its bound.
func TestPublishCostTarget(t *testing.T) {
	cost := target(t, lab.Options{}, "publish-cost-cpu-per-msg")
	rows := func(gwUs, directUs []float64) []*labresult.Row {
		gw, direct := &labresult.Row{Key: costGatewayAtRate}, &labresult.Row{Key: costDirectAtRate}
		for i := range gwUs {
			gw.PerRun = append(gw.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{gatewayCPUPerMsg.Name: gwUs[i]}})
		}
		for i := len(directUs) - 1; i >= 0; i-- { // listed backwards: pairs join on the round
			direct.PerRun = append(direct.PerRun, labresult.RunValues{Round: i + 1, Values: map[string]float64{producerCPUPerMsg.Name: directUs[i]}})
		}
		return []*labresult.Row{gw, direct}
	}
	for _, tc := range []struct {
		name           string
		gwUs, directUs []float64
		pairs          int
		want           float64
		verdict        labresult.TargetVerdict
	}{
		{"within the bound", []float64{8, 8.2, 7.9, 8.1}, []float64{10, 10, 10, 10}, 4, math.Pow(0.8*0.82*0.79*0.81, 0.25), labresult.Holds},
		{"beyond it", []float64{20, 21, 19, 20}, []float64{10, 10, 10, 10}, 4, math.Pow(2*2.1*1.9*2, 0.25), labresult.Fails},
		{"straddling it", []float64{10, 15}, []float64{8, 10}, 2, math.Sqrt(10.0 / 8 * 15 / 10), labresult.Undecided},
	} {
		got := cost.Evaluate(rows(tc.gwUs, tc.directUs))
		if got.Pairs != tc.pairs || got.Value == nil || math.Abs(*got.Value-tc.want) > 1e-9 || got.Verdict != tc.verdict || got.Spread == nil {
			t.Errorf("%s: %d pairs, value %s, spread %v, %s (%s); want %d pairs, %.4f, %s", tc.name, got.Pairs, value(got.Value), got.Spread, got.Verdict, got.Why, tc.pairs, tc.want, tc.verdict)
		}
		if got.Metric != gatewayCPUPerMsg.Name || got.DenMetric != producerCPUPerMsg.Name || got.Bound != "<= 1.2" {
			t.Errorf("%s: reads %s over %s, bound %q", tc.name, got.Metric, got.DenMetric, got.Bound)
		}
	}
}

func TestLinesWriter(t *testing.T) {
	var got []string
	l := &lines{keep: 1, on: func(s string) { got = append(got, s) }}
	for _, part := range []string{"databus-checker: measured win", "dow open\nsecond\nthi", "rd"} {
		l.Write([]byte(part))
	}
	if len(got) != 2 || got[0] != "databus-checker: measured window open" || got[1] != "second" {
		t.Errorf("lines %q: want the two complete lines, split across writes", got)
	}
	if tail := l.tail(); tail != "second | third" {
		t.Errorf("tail %q: want the one line kept and the unfinished one", tail)
	}
	all := &lines{}
	all.Write([]byte("{\n  \"a\": 1\n}\n"))
	if text := all.text(); text != "{\n  \"a\": 1\n}\n" {
		t.Errorf("text %q: want everything written", text)
	}
}
