package replicaexp

import (
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// The setup items the claim's rows (pricing, before and after) run with:
// pricing passes each where it starts or loads them
// (Run.UsedInFirstClaim), so the declaration cannot drift from the run.
const (
	itemPricingDB    = "pricing's database (its \"before\" reads every entity there)"
	itemFeed         = "what keeps the replica fresh"
	itemPricingData  = "what a price request reads"
	itemPricingQuota = "quotas of the pricing rows"
	itemPricingLoad  = "load on the pricing rows"
)

// noMongodHere says why no row runs mongod.
const noMongodHere = "no mongod installs here (not in Debian, and MongoDB's download hosts are unreachable)"

// noMongod is why the report's MongoDB is not what the pricing rows read.
const noMongod = noMongodHere + "; " +
	"the MongoDB stand-in (mongo-java-server: Java, in memory) does not cost what mongod costs, so it cannot stand for a database's \"before\" either. " +
	"Postgres is the database the lab has, durable; the catalog's rows from the stand-in's change streams rerun the report's own source where a stand-in can"

// pricingDBText is the database pricing's source reads every request.
func pricingDBText(external bool, source refdata.Source) string {
	db := "Postgres (the lab's, durable: fsync and synchronous commit on)"
	if external {
		db = "an external Postgres (--postgres)"
	}
	return fmt.Sprintf("%s; hlab serve pricing --source %s queries all 8 entities, one query each", db, source)
}

// feedText is what feeds the replica pricing's source reads from.
func feedText(source refdata.Source) string {
	return fmt.Sprintf("Postgres logical replication: a slot and publication on the 7 reference tables, pgoutput; the copy from the slot's exported snapshot, then the changes after it (hlab serve pricing --source %s)", source)
}

// dataText is what one price request reads, from the seed's sizes.
func dataText() string {
	return fmt.Sprintf("8 rows by primary key: the product (of %d) and 7 reference rows, of brands (%d), categories (%d), cities (%d), zones (%d), warehouses (%d), customer groups (%d), price rules (%d); always GET %s",
		refdata.DefaultProducts, refdata.NumBrands, refdata.NumCategories, refdata.NumCities, refdata.NumZones,
		refdata.NumWarehouses, refdata.NumGroups, refdata.NumRules, pricingPath)
}

// quotaText gives the pricing rows' quotas.
func quotaText(svcCPU float64, svcMemMB int, pgCPU float64) string {
	return fmt.Sprintf("service %g CPU and %d MB (cgroup); Postgres %g CPU (cgroup); the load generator outside both", svcCPU, svcMemMB, pgCPU)
}

// loadText gives a closed-model load in rounds.
func loadText(conns int, run time.Duration) string {
	return fmt.Sprintf("hlab load, closed model, %d connections, runs of %v in rounds with the other pricing row, their order alternating", conns, run)
}

// setupItems sets the experiment's setup beside the report's.
func setupItems(o lab.Options) []labresult.Setup {
	t := timings(o)
	external := o.ExternalFor(lab.DepPostgres)
	conns := make([]string, len(catalogConns))
	for i, c := range catalogConns {
		conns[i] = fmt.Sprint(c)
	}
	vus := strings.Join(conns, " ")
	return []labresult.Setup{{
		Item:       itemPricingDB,
		Report:     "Percona MongoDB 6 (the pricing system's database)",
		Ours:       pricingDBText(external, refdata.FromPostgres),
		Why:        noMongod,
		FirstClaim: true,
	}, {
		Item:       itemFeed,
		Report:     "MongoDB change streams (Watch) on a Percona MongoDB 6 replica set: watching first, then copying every collection into the app's memory",
		Ours:       feedText(refdata.FromReplica),
		Why:        "logical replication is Postgres's stream of committed changes, as the oplog is MongoDB's, and the replica watches before it copies as the report's did; " + noMongod,
		FirstClaim: true,
	}, {
		Item:       itemPricingData,
		Report:     "8 entities per price (the product, its brand, its category, the store's region and others); 7 of them reference data, their collections a few MB in all",
		Ours:       dataText(),
		Why:        "the report names four of its eight entities and gives no sizes; ours are seven small tables and one large one, as it describes",
		FirstClaim: true,
	}, {
		Item:       itemPricingQuota,
		Report:     "not given (its figures are recalled: \"exact metrics and results were not kept\")",
		Ours:       quotaText(serviceCPU, serviceMemMB, postgresCPU),
		Why:        "the report gives none for its pricing test; 1 CPU as its catalog's cpulimit 100%, and the database bounded too, so that the \"before\" cannot borrow the machine's other core",
		FirstClaim: true,
	}, {
		Item:       itemPricingLoad,
		Report:     "not given: a load test that went from 5k to 25k rps, then the load generator's CPU was the limit",
		Ours:       loadText(pricingConns, t.run),
		Why:        "the report gives no tool, connections or duration for it; 64 connections keep both services busy here, and rounds put the machine's noise on both rows alike",
		FirstClaim: true,
	}, {
		Item:       "instances",
		Report:     "not given for the pricing test; one catalog instance under k6",
		Ours:       "one instance of each service per row",
		Why:        "the report gives no count for its pricing test; one instance per row makes the claim a ratio per instance, the report's catalog test's shape",
		FirstClaim: true,
	}, {
		Item:       "machine",
		Report:     "iMac M1, 16 GB (the catalog's test; the pricing test's is not given)",
		Ours:       "this machine: its cores shared by the service, the database and the load generator (the run's env gives them)",
		Why:        "the lab runs where it is; the claim is a ratio of two rows measured here, side by side",
		FirstClaim: true,
	}, {
		Item:   "the catalog's CPU limit",
		Report: "cpulimit 100% (1 CPU; cpulimit stops and continues the process)",
		Ours:   fmt.Sprintf("%g CPU cgroup quota, %d MB", serviceCPU, serviceMemMB),
		Why:    "a cgroup quota is how the lab bounds every service; it throttles per 100 ms period, finer than cpulimit's signals",
	}, {
		Item:   "the catalog's data",
		Report: "the wholesale customers, all in memory (their count and size not given)",
		Ours:   fmt.Sprintf("%d customers; every request GET %s, one customer by id", refdata.DefaultCustomers, catalogPath),
		Why:    "the report gives no size; a lookup by key in memory costs the same for any key, so one id changes nothing but what the CPU caches hold",
	}, {
		Item:   "load on the catalog",
		Report: "k6 run --vus N --duration 100s script.js, N = " + vus + " (runs of 10 s to an hour gave the same averages)",
		Ours:   fmt.Sprintf("hlab load, closed model, N connections (one per VU), N = %s; runs of %v", vus, t.run),
		Why:    "k6 is under the AGPL and stays out of the project; a closed-model connection is a k6 VU's loop. Quick mode runs 5 s, --full the report's 100 s",
	}, {
		Item:   "the catalog's production load",
		Report: "production, at a peak of 2-3k requests per minute: 120 µs mean, near-zero CPU",
		Ours:   fmt.Sprintf("hlab load, open model, %d requests per minute, at most %d in flight, runs of %v; timed from each request's intended send", productionPerMin, compareConns, t.prod),
		Why:    "production's requests arrive whether or not earlier ones were answered: the open model at the middle of the report's peak; where production timed its mean the report does not say",
	}, {
		Item:   "the micro-benchmark's stores",
		Report: "Percona MongoDB v6 standalone; Redis v7; Watch on a Percona MongoDB v6 replica set",
		Ours:   "mongo-java-server 1.47 (a stand-in, not mongod); redis-server from Debian (7.0); the in-memory replica fed by the stand-in's change stream",
		Why:    noMongodHere + ": the MongoDB Get and the replica's feed run on the stand-in, a Java in-memory server, so its ns/op is not mongod's; Redis is Debian's",
	}}
}
