package crudexp

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/loadgen"
)

// fixedRun is one of the report's runs of a fixed number of requests,
// and what the report says of it.
type fixedRun struct {
	key, cfg labresult.Key
	reqs     int64
	report   string
}

// fixedRunsOf are the fixed-count runs: a million with every optimization
// on (the report's final run), then 12,000 and 100,000 with every one off
// (the runs before). The 100,000-request run ran into Postgres refusing
// connections in the report (max_connections 410, here too; the service
// answers 503 busy to SQLSTATE 53300, beside its 503s of requests over
// the request timeout).
var fixedRunsOf = []fixedRun{
	{millionKey, allOnKey, millionReqs, "report C: about 2 hours at about 10-13k req/min, CPU peak 60%, memory only 150 MB, each query 200-400 ms, mean about 2 s"},
	{twelveKKey, allOffKey, twelveKReqs, "report C: fine, more than 52 req/s (3,120 req/min), mean 278 ms, 13 MB sent, 89 MB received"},
	{hundredKKey, allOffKey, hundredKReqs, `report C: about 40 minutes, about 2,500 req/min, CPU 60%, memory 50% (of 2 GB), 66 MB sent, 462 MB received, then "too many connections" (max_connections 410, as here)`},
}

// fixedRuns measures, in --full, the report's runs of a fixed number of
// requests: like its k6, the VUs go as fast as the service answers until
// the count is done.
func (b *bench) fixedRuns(ctx context.Context) error {
	if b.run.Opts.Mode != lab.Full {
		return nil
	}
	for _, f := range fixedRunsOf {
		in := b.svcs[f.cfg]
		m := b.measurement(f.key, f.cfg, in.sc, 40*time.Minute, loadgen.Connections(vus), loadgen.Requests(f.reqs))
		m.Repeat, m.NoWarmup = 1, true
		if f.cfg == allOffKey {
			m.MinSuccess = slowBound
		}
		// The report gives the final run's CPU peak: the row's meter gives
		// the average, this one the peak of its 100 ms samples.
		meter := in.svc.Proc.Measure()
		row, err := b.measure(ctx, f.cfg, m)
		if err != nil {
			return err
		}
		row.Set(cpuPeak, meter.Stop().CPUMax)
		if rps := row.Value(labresult.RPS); rps > 0 {
			row.Set(seconds, float64(row.Requests)/rps)
			row.Set(reqPerMin, rps*60)
		}
		row.AddNote("%d requests in %.0f s, %s, mean %.0f ms, %d failed (%s); %s",
			row.Requests, row.Value(seconds), perMinute(row), row.Value(labresult.MeanMS), failures(row), kinds(row), f.report)
	}
	return nil
}

// perMinute gives a fixed-count row's rate and CPU as the report gives
// its final run's: requests per minute, CPU average and peak (of 100 ms
// samples; the report's peak is from coarser monitoring) in % of the 1 CPU.
func perMinute(r *labresult.Row) string {
	return fmt.Sprintf("%.0f req/min, CPU avg %.0f%%, peak %.0f%%", r.Value(reqPerMin), 100*r.Value(labresult.CPUAvg), 100*r.Value(cpuPeak))
}
