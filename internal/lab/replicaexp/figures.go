package replicaexp

import (
	"fmt"

	"github.com/highload-lab/hlab/internal/lab"
)

// figures accounts for report B's figures (shared/REFERENCE.md).
func figures(o lab.Options) []lab.Figure {
	figs := []lab.Figure{
		lab.Rerun("8x fewer DB queries", "the target on queries per request and the pricing rows' queries_per_request"),
		lab.NotRerunFigure("CPU of the app and the database down several times", "no figure to judge; the pricing rows give each one's CPU per request, before and after"),
		lab.Rerun("mean response 15 ms -> 1 ms", "rows: "+pricingBefore+"; "+pricingAfter+" (the report's means as references)"),
		lab.Rerun("load test 5k -> 25k rps", "claim 1 over the pricing rows"),
		lab.NotRerunFigure("then the load generator was the bottleneck", "said in the claim's report text; no row: our generator runs outside the services' quotas"),
		lab.Rerun("the wholesale catalog, all in memory, averaged 120 µs (not ms) per response with near-zero CPU, in production, at a peak of 2-3k requests per minute", "row: "+catalogProdLabel+" (its mean beside the report's 0.12 ms, its cpu column for the near-zero CPU)"),
		lab.Rerun("the k6 test was run for the article, to show the catalog under tens of thousands of rps with its CPU limited, far above its production peak", "the catalog rows at 1 to 200 connections (closed model, 1 CPU)"),
		lab.Rerun("Go micro-benchmark: user Get via MongoDB, Redis and the in-memory replica, about 10^4x", "rows: "+microLabel(microMongo)+", "+microLabel(microRedis)+", "+microLabel(microReplica)+" and their two ratio rows"),
	}
	for _, c := range []int{1, 2, 3, 4, 5, 10, 100, 200} {
		figs = append(figs, lab.Rerun(fmt.Sprintf("k6, %d VUs, app at 1 CPU: %.0f req/s", c, catalogRef[c]), "row: "+catalogLabel(c)))
	}
	faults := lab.Rerun("caveat: resume tokens avoid a full reload; a token gone (oplog rolled over) needs one", "rows: "+faultConnKilledLabel+"; "+faultPGRestartLabel+"; "+faultSlotLostLabel+" (Postgres's equivalents; the stand-in never loses its history, so MongoDB's case is in package replica's proxy tests)")
	if o.ExternalFor(lab.DepPostgres) {
		faults = lab.Rerun("caveat: resume tokens avoid a full reload; a token gone (oplog rolled over) needs one", "row: "+faultConnKilledLabel+" (Postgres's equivalent; its other fault rows are listed as not rerun)")
		figs = append(figs,
			lab.NotRerunFigure("Postgres restarted under the replica (row: "+faultPGRestartLabel+")", lab.ExternalReason+" (--postgres): it does not restart it"),
			lab.NotRerunFigure("a replication slot lost to WAL limits (row: "+faultSlotLostLabel+")", lab.ExternalReason+" (--postgres): it does not change its max_slot_wal_keep_size"))
	}
	return append(figs,
		lab.Rerun("35,540 req/s, the average of the rows from 4 VUs up", "row: "+catalogAvgLabel),
		lab.Rerun("MongoDB Watch (change streams) keeping the replica fresh", "rows: "+catalogMongoLabel+"; "+freshMongoQuietLabel+"; "+freshMongoLabel+" (a stand-in, not mongod: its limits are in each row's note)"),
		lab.Rerun("runs of 10 s to an hour with the same averages; k6 --duration 100s per VU count", "--full runs each catalog row 100 s; quick mode says its shorter runs in a note"),
		lab.Rerun("caveat: replication lag, small but real", "the freshness rows, from Postgres and from the stand-in"),
		lab.Rerun("caveat: the replica supports only what its structure supports (a plain map loses sorting)", "row: "+catalogListLabel),
		lab.NotRerunFigure("caveat: the initial load takes time; readiness must wait for it", "no row: the lab measures once /healthz answers, which waits for the load; the replica's tests cover readiness"),
		lab.Rerun("caveat: errors in the watching goroutine must reach request handlers", "the bad-input row and its targets, and the fault rows"),
		faults,
		lab.Rerun("caveat: many instances with Watch starting at once load the network and the database with their snapshots", "rows: "+startLimitLabel+"; "+startNoLimitLabel+" (Postgres's snapshots, the replicas in the lab process rather than 8 services: 8 quotas of 1 CPU would ask 4 times this machine)"),
		lab.NotRerunFigure("the catalog's horizontal scaling is not limited, since it does not depend on the database", "no multi-instance row: one instance per row on 2 cores"),
		lab.NotRerunFigure("ideas: deliver changes to other services' memory over gRPC or NATS streams; shard in the application when the data outgrows one instance", "proposals, not measurements"),
	)
}
