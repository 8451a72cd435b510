package databusexp

import (
	"math"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/lab"
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

func TestPerRound(t *testing.T) {
	gw := &lab.Row{PerRun: []lab.RunValues{
		{Round: 1, Values: map[string]float64{"cpu_avg": 1, "rps": 100000}},  // 10 µs/msg
		{Round: 2, Values: map[string]float64{"cpu_avg": 0.9, "rps": 60000}}, // 15 µs/msg
		{Round: 3, Values: map[string]float64{"rps": 60000}},                 // no CPU: skipped
	}}
	direct := &lab.Row{PerRun: []lab.RunValues{
		{Round: 2, Values: map[string]float64{"producer_cpu_us_per_msg": 10}},
		{Round: 1, Values: map[string]float64{"producer_cpu_us_per_msg": 8}},
		{Round: 3, Values: map[string]float64{"producer_cpu_us_per_msg": 8}},
	}}
	got := perRound(gw, direct, gatewayUsPerMsg, directUsPerMsg)
	want := []float64{10.0 / 8, 15.0 / 10} // paired by round, not by position
	if len(got) != len(want) {
		t.Fatalf("ratios %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("ratio %d = %v, want %v", i, got[i], want[i])
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
