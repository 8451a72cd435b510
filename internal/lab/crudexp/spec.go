package crudexp

import (
	"fmt"
	"strings"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/tasks"
)

// Row keys. A row with one optimization switched off is "off/<what>".
const (
	allOnKey        labresult.Key = "all-on"
	allOffKey       labresult.Key = "all-off"
	open3000Key     labresult.Key = "all-on/open-3000"
	millionKey      labresult.Key = "all-on/fixed-1m"
	twelveKKey      labresult.Key = "all-off/fixed-12k"
	hundredKKey     labresult.Key = "all-off/fixed-100k"
	poolOffKey      labresult.Key = "off/pool-limits"
	telemetryOffKey labresult.Key = "off/telemetry-cap"
	indexOffKey     labresult.Key = "off/indexes"
	touchOnKey      labresult.Key = "off/no-user-touch"
	defaultTxKey    labresult.Key = "off/no-default-tx"
	perJobKey       labresult.Key = "off/worker-queue"
	richOnKey       labresult.Key = "all-on/richer"
	richIndexOffKey labresult.Key = "off/indexes/richer"
	fdOnKey         labresult.Key = "all-on/c1200"
	fdOffKey        labresult.Key = "off/raise-file-limit/c1200"
)

// Row labels, as the tables and the report's coverage (figures.go) read.
const (
	allOn        = "all optimizations on"
	open3000     = "all on, open model 3,000 req/s (richer iteration)"
	million      = "all on, 1,000,000 requests (closed model, 100 VUs)"
	hundredK     = "all off, 100,000 requests (closed model, 100 VUs)"
	twelveK      = "all off, 12,000 requests (100 VUs x 30 iterations)"
	poolOff      = "1. pool limits off (database/sql defaults)"
	telemetryOff = "2. telemetry uncapped (every request traced, export never drops)"
	indexOff     = "3. indexes off"
	touchOn      = "4. user row updated on every request (the lock bug)"
	defaultTx    = "5. a transaction around every write (ORM default)"
	fdOff        = "6. open-file limit kept at 1,024, 1,200 connections"
	fdOn         = "all on (limit raised), 1,200 connections"
	perJob       = "7. a goroutine per side job (no worker queue)"
	allOff       = "all optimizations off"
	richOn       = "all on, richer iteration (lists, 65% reads)"
	richIndexOff = "3. indexes off, richer iteration (lists, 65% reads)"
)

// variant is a configuration of the service, one process of it: the
// optimizations it turns off, and the row it is named by (its own row
// under the report's iteration, or for optimization 6 its row at 1,200
// connections).
type variant struct {
	key   labresult.Key
	label string
	deopt tasks.Deopt
}

var (
	on = variant{key: allOnKey, label: allOn}
	// variants are the rows with one optimization off at 100 VUs.
	variants = []variant{
		{key: poolOffKey, label: poolOff, deopt: tasks.Deopt{NoPoolLimits: true}},
		{key: telemetryOffKey, label: telemetryOff, deopt: tasks.Deopt{UncappedTelemetry: true}},
		{key: indexOffKey, label: indexOff, deopt: tasks.Deopt{NoIndexes: true}},
		{key: touchOnKey, label: touchOn, deopt: tasks.Deopt{UserTouch: true}},
		{key: defaultTxKey, label: defaultTx, deopt: tasks.Deopt{DefaultTx: true}},
		{key: perJobKey, label: perJob, deopt: tasks.Deopt{GoroutinePerJob: true}},
	}
	fdVariant = variant{key: fdOffKey, label: fdOff, deopt: tasks.Deopt{KeepFileLimit: true}}
	off       = variant{key: allOffKey, label: allOff,
		deopt: tasks.Deopt{NoPoolLimits: true, UncappedTelemetry: true, NoIndexes: true, DefaultTx: true, UserTouch: true, KeepFileLimit: true, GoroutinePerJob: true}}
)

// configs lists every configuration, in the order they start: all on,
// the variants, optimization 6 off, all off.
func configs() []variant {
	out := append([]variant{on}, variants...)
	return append(out, fdVariant, off)
}

// The report's figures, each beside the row measured as the report
// measured it: its first run (12,000 requests, 100 VUs, before the
// optimizations: more than 52 req/s, mean 278 ms) beside all off, which
// runs 100 VUs of the same iteration with every optimization off, and
// beside the 12,000-request row; its 100,000-request run (about 2,500
// requests a minute) and its final run (1,000,000 requests at 10-13k a
// minute, mean about 2 s) beside the --full rows of those counts. The
// claim's all-on row has none: the report's figures after the
// optimizations are of its million-request run.
var (
	refMillion  = &labresult.Ref{RPS: labresult.F(11500.0 / 60), MeanMS: labresult.F(2000)}
	refHundredK = &labresult.Ref{RPS: labresult.F(2500.0 / 60)}
	refAllOff   = &labresult.Ref{RPS: labresult.F(52), MeanMS: labresult.F(278)}
)

// rows declares every row with o, in the order they are shown: the
// claim's all-on row, the open-model row, in --full the fixed counts,
// each optimization off, all off, the richer iteration, and 1,200
// connections.
func rows(o lab.Options) []lab.RowSpec {
	out := []lab.RowSpec{lab.Row(allOnKey, allOn), lab.Row(open3000Key, open3000)}
	if o.Mode == lab.Full {
		out = append(out, lab.RefRow(millionKey, million, refMillion), lab.RefRow(twelveKKey, twelveK, refAllOff), lab.RefRow(hundredKKey, hundredK, refHundredK))
	}
	for _, v := range variants {
		out = append(out, lab.Row(v.key, v.label))
	}
	return append(out, lab.RefRow(allOffKey, allOff, refAllOff),
		lab.Row(richOnKey, richOn), lab.Row(richIndexOffKey, richIndexOff),
		lab.Row(fdOnKey, fdOn), lab.Row(fdOffKey, fdOff),
		lab.Row(deliveryKey, deliveryLabel))
}

// heldAgainst is, for each row with optimizations switched off, the
// all-on row it is compared with (a ratio shown; for all off, the
// claim), and what the report said the optimization was worth (a row
// note).
var heldAgainst = []struct {
	off, on labresult.Key
	report  string
}{
	{poolOffKey, allOnKey, `"too many connections" at 100k requests (Postgres max 410); no ratio given`},
	{telemetryOffKey, allOnKey, "no figure; effect: the collector had starved the API. Here the collector is the lab's sink, outside the quota, so the row is the service's own cost of tracing and exporting every request (otlp_mb_per_run: what it sent)"},
	{indexOffKey, allOnKey, "its GET's query from about 14.6 s (EXPLAIN ANALYZE: LEFT JOIN about 14.6 s, LIMIT another 14.6 s) to about 50 ms (292x); indexes on WHERE and ORDER BY fields up to 5x for queries. Here: get_query_ms and get_join_ms, the same query's EXPLAIN ANALYZE on this row's database as seeded"},
	{touchOnKey, allOnKey, "fixing it: 2x throughput"},
	{defaultTxKey, allOnKey, "skipping it: at least +30% throughput (1.3x)"},
	{perJobKey, allOnKey, "no figure given (here the workers also look devices up for a batch of jobs in one query; a goroutine per job makes one query each)"},
	{allOffKey, allOnKey, "5x overall (more than 52 req/s, mean 278 ms in its 12k-request run: the reference beside this row)"},
	{richIndexOffKey, richOnKey, "its 14.6 s to 50 ms is its GET's query (row 3); the lists here are ours, their indexes those of the report's WHERE and ORDER BY fields"},
	{fdOffKey, fdOnKey, `no figure; effect: sockets past the limit fail with "too many open files"`},
}

func (*Experiment) Spec(o lab.Options) lab.Spec {
	return lab.Spec{
		Name:  "crud",
		Title: "a task API on 1 CPU / 2 GB: report C's seven optimizations, each switched off in turn (report C)",
		Rows:  rows(o),
		Claims: []labresult.Claim{{
			Text:   "with all seven optimizations on, the task API serves >= 5x the requests per second of all off, under the report's k6 iteration (create, update, get, delete; the get is the report's LEFT JOIN ... ORDER BY id LIMIT 1)",
			Ratio:  labresult.Ratio{Num: allOnKey, Den: allOffKey, Metric: labresult.RPS.Name},
			Bound:  labresult.AtLeast(5),
			Report: "5x (52 req/s before; 10-13k requests per minute after)",
		}},
		Targets: append(targets(o), shownRatios()...),
		Metrics: metrics(),
		Figures: figures(o),
		Setup:   setup(o),
		Needs:   []string{lab.DepPostgres},
	}
}

// targets are our own bounds: the task API sustains 3,000 req/s with a
// p99 under 50 ms, and in --full serves a million requests in under 6
// minutes within 150 MB, without errors either time.
func targets(o lab.Options) []labresult.Target {
	_, openDur, _ := timing(o)
	intended := openRate * openDur.Seconds()
	out := []labresult.Target{
		{Key: "open-3000-sent", Row: open3000Key, Metric: labresult.Requests.Name, Bound: labresult.AtLeast(intended),
			Text: fmt.Sprintf("the task API answers every request sent at 3,000 req/s for %s, %.0f (its rps counts the drain of the last answers too, so it reads a little under the rate)", openDur, intended)},
		{Key: "open-3000-p99", Row: open3000Key, Metric: labresult.P99MS.Name, Bound: labresult.AtMost(50),
			Text: "the task API sustains 3,000 req/s with p99 < 50 ms, from the intended send times"},
		{Key: "open-3000-errors", Row: open3000Key, Metric: failed.Name, Bound: labresult.AtMost(0),
			Text: "the task API answers 3,000 req/s without a failed request"},
		{Key: "events-lost", Row: deliveryKey, Metric: labresult.Lost.Name, Bound: labresult.AtMost(0),
			Text: "ours: with --events postgres, every change acknowledged through one instance reaches its account's device on the other"},
		{Key: "get-join-share", Ratio: &labresult.Ratio{Num: allOffKey, Den: allOffKey, Metric: getJoinMS.Name, DenMetric: getQueryMS.Name}, Bound: labresult.AtLeast(0.5),
			Text: "without the join's index, the LEFT JOIN is most of the GET's query time (EXPLAIN ANALYZE on the seeded data), as in the report's plan: the all-off row runs the report's slow GET"},
	}
	if o.Mode != lab.Full {
		return out
	}
	return append(out,
		labresult.Target{Key: "million-sent", Row: millionKey, Metric: labresult.Requests.Name, Bound: labresult.AtLeast(millionReqs),
			Text: "every one of the 1,000,000 requests is answered"},
		labresult.Target{Key: "million-seconds", Row: millionKey, Metric: seconds.Name, Bound: labresult.AtMost(360),
			Text: "1,000,000 requests in under 6 minutes (the report's final run took about 2 hours)"},
		labresult.Target{Key: "million-rss", Row: millionKey, Metric: labresult.RSSMBMax.Name, Bound: labresult.AtMost(150),
			Text: "1,000,000 requests with the service's RSS at most 150 MB (the report's figure for its final run)"},
		labresult.Target{Key: "million-errors", Row: millionKey, Metric: failed.Name, Bound: labresult.AtMost(0),
			Text: "1,000,000 requests without a failed request"})
}

// shownRatios are how many times the requests per second of each row
// with an optimization off its all-on counterpart serves ("rps-ratio/"
// and the optimization, as the row's key names it), and the GET query's
// and the list query's own times without the indexes over with them:
// shown beside the rows, judged against nothing. All on over all off is
// the claim.
func shownRatios() []labresult.Target {
	var out []labresult.Target
	for _, h := range heldAgainst {
		if h.off == allOffKey {
			continue // all on over all off is the claim's ratio, with its interval
		}
		out = append(out, labresult.Target{Key: "rps-ratio/" + labresult.Key(strings.TrimPrefix(string(h.off), "off/")),
			Text:  fmt.Sprintf("%s / %s: requests per second", labelOf(h.on), labelOf(h.off)),
			Ratio: &labresult.Ratio{Num: h.on, Den: h.off, Metric: labresult.RPS.Name}})
	}
	return append(out,
		labresult.Target{Key: "get-query-ratio/indexes",
			Text:  "the GET's query without the join's index / with it (EXPLAIN ANALYZE on each database as seeded; the report: 14.6 s / 50 ms, 292x)",
			Ratio: &labresult.Ratio{Num: indexOffKey, Den: allOnKey, Metric: getQueryMS.Name}},
		labresult.Target{Key: "list-query-ratio/indexes",
			Text:  "the list query's own time without the indexes / with them (straight on each database)",
			Ratio: &labresult.Ratio{Num: indexOffKey, Den: allOnKey, Metric: listQueryMS.Name}})
}

// labelOf is the label rows declares for key, in either mode.
func labelOf(key labresult.Key) string {
	for _, r := range rows(lab.Options{Mode: lab.Full}) {
		if r.Key == key {
			return r.Label
		}
	}
	return string(key)
}
