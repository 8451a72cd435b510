package crudexp

import (
	"fmt"
	"sort"
	"strings"

	"github.com/highload-lab/hlab/internal/labresult"
)

// addRows adds every measured row in the order the Spec shows them, with
// what around sampled beside it, the list query's time on its database
// and its notes.
func (b *bench) addRows() {
	for _, spec := range rows(b.run.Opts) {
		row := b.rows[spec.Key]
		if row == nil {
			continue
		}
		b.figures(row)
		b.notes(row)
		b.run.AddRow(row)
	}
}

// figures sets what around sampled beside the row, its failed requests,
// and the list query's and the GET query's times on the database its
// configuration used.
func (b *bench) figures(row *labresult.Row) {
	row.Set(failed, float64(failures(row)))
	s := b.sampled[row.Key]
	if s == nil {
		return
	}
	if s.pgRuns > 0 {
		row.Set(postgresCPU, s.pgCPU/float64(s.pgRuns))
		row.Set(otlpMBPerRun, float64(s.otlp)/float64(s.pgRuns)/(1<<20))
	}
	row.Set(wsEvents, float64(s.ws))
	withIdx := !s.cfg.deopt.NoIndexes
	if q, ok := b.listQuery[withIdx]; ok {
		row.Set(listQueryMS, q)
	}
	if p, ok := b.getPlan[withIdx]; ok {
		row.Set(getQueryMS, p.execMS)
		row.Set(getJoinMS, p.joinMS)
	}
}

// notes puts, beside each row with optimizations switched off, what the
// report said the optimization was worth, and why a row is held to less
// than the default success.
func (b *bench) notes(row *labresult.Row) {
	for _, h := range heldAgainst {
		if h.off != row.Key {
			continue
		}
		row.AddNote("report: %s", h.report)
		if best := b.rows[h.on]; h.off == fdOffKey && best != nil {
			row.AddNote("%d of %d requests failed here (%s), %d with the limit raised (%s); open-file limit %.0f here, %.0f raised",
				failures(row), row.Requests, kinds(row), failures(best), kinds(best), row.Value(maxFDs), best.Value(maxFDs))
		}
	}
	if row.SuccessBound < labresult.DefaultSuccessBound {
		row.AddNote("held to %.0f%% success: %s", row.SuccessBound*100, whyBound(row.Key))
	}
}

// whyBound says why a row is held to less than the default success.
func whyBound(key labresult.Key) string {
	if key == fdOffKey {
		return "the connections past the limit failing is the effect measured"
	}
	return "requests over the service's 5 s request timeout answer 503 by design (the full run answered 85%)"
}

// kinds lists a row's failures by kind and status, largest first.
func kinds(r *labresult.Row) string {
	type kv struct {
		k string
		n int64
	}
	var all []kv
	for k, n := range r.Errors {
		if n > 0 {
			all = append(all, kv{k, n})
		}
	}
	for code, n := range r.StatusCodes {
		if failedStatus(code) && n > 0 {
			all = append(all, kv{"HTTP " + code, n})
		}
	}
	if len(all) == 0 {
		return "none"
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.n))
	}
	return strings.Join(parts, ", ")
}

// failures counts a row's requests without a 2xx/3xx answer.
func failures(r *labresult.Row) int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	for code, v := range r.StatusCodes {
		if failedStatus(code) {
			n += v
		}
	}
	return n
}

// failedStatus reports whether an HTTP status (as Row.StatusCodes keys
// it) is a failure: 4xx or 5xx.
func failedStatus(code string) bool { return len(code) == 3 && code[0] >= '4' }
