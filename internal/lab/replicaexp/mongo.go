package replicaexp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/userrepo"
	"github.com/highload-lab/hlab/replica"
)

// The report's own source is MongoDB Watch. No mongod installs here, so
// these rows run against the stand-in internal/deps starts
// (mongo-java-server), and every label and note says so.
const (
	mongoCPU   = 1.0 // the stand-in's own quota, as Postgres's
	mongoMemMB = 1024
	mongoDB    = "hlab"
	// probeID is the customer whose email the freshness probes set:
	// only they write that field.
	probeID    = 4243
	probeGap   = 10 * time.Millisecond // between one probe seen and the next write
	probeLimit = 5 * time.Second       // a probe not visible by then is counted unseen
	benchUsers = 10_000                // as internal/userrepo's benchmark
	// microRatio is the report's "about four orders of magnitude".
	microRatio = 1e4
)

// standInLimits is what the stand-in does not do that mongod does (from
// internal/deps/mongo.go), for the notes of the rows it feeds.
const standInLimits = "MongoDB stand-in (mongo-java-server), not mongod: one in-memory server, no replica set (no secondaries, elections, majority commit point or rollback), no durability; " +
	"its oplog has no size limit and is never truncated, so resume tokens never expire (no ChangeStreamHistoryLost) and each getMore scans the whole oplog; " +
	"it ignores maxAwaitTimeMS, so the source polls an idle stream every 20 ms (MongoPollInterval); change events carry no wallTime, so commit times count whole seconds"

// The rows the stand-in feeds.
const (
	catalogMongoKey    labresult.Key = "catalog/mongo-stand-in/c100"
	freshMongoQuietKey labresult.Key = "freshness/mongo-stand-in/no-writes"
	freshMongoKey      labresult.Key = "freshness/mongo-stand-in/writes"

	catalogMongoLabel = "catalog from a replica fed by the MongoDB stand-in (not mongod), 100 connections"
	freshMongoLabel   = "freshness, 1,000 writes/s: catalog fed by the MongoDB stand-in (not mongod), write to visible through the service"
	// freshMongoQuietLabel: the same probe with no other writes.
	freshMongoQuietLabel = "freshness, no other writes: catalog fed by the MongoDB stand-in (not mongod), write to visible through the service"
)

// microPrefix starts the micro-benchmark's labels: rows of ns/op and
// ratios, with no latency distribution.
const microPrefix = "micro-benchmark: "

// The micro-benchmark's stores, as their labels name them.
const (
	microMongo   = "via the MongoDB stand-in (not mongod)"
	microRedis   = "via Redis"
	microReplica = "from the in-memory replica (fed by the stand-in's change stream)"
)

func microLabel(store string) string { return microPrefix + "user Get " + store }

func microRatioLabel(store string) string {
	return microPrefix + store + " Get / in-memory replica Get"
}

// microStores are the micro-benchmark's stores, in the order its rows
// go: each a row of its Gets (key), and, but for the in-memory replica
// itself, a row of its ns/op over the replica's (ratioKey), which names
// the store as name.
var microStores = []struct {
	key, ratioKey labresult.Key
	store, name   string
}{
	{"micro/mongo-stand-in", "micro/ratio/mongo-stand-in", microMongo, "MongoDB stand-in"},
	{"micro/redis", "micro/ratio/redis", microRedis, "Redis"},
	{"micro/replica", "", microReplica, ""},
}

// mongo starts the stand-in, loads the customers into it, measures the
// catalog served from a replica it feeds and that replica's freshness
// through the service, then runs the user-repository micro-benchmark.
func (b *bench) mongo(ctx context.Context) error {
	b.run.Progress.Step("start the MongoDB stand-in and load the customers", 5*time.Second)
	m, err := deps.StartMongo(ctx, b.run.Sandbox, deps.MongoConfig{JVMConfig: deps.JVMConfig{CPU: mongoCPU, MemoryMB: mongoMemMB}})
	if err != nil {
		return err
	}
	defer m.Stop()
	b.run.SetEnv("mongo", fmt.Sprintf("%s, own quota %.0f CPU: a stand-in, not mongod", m.Kind, mongoCPU))
	// Every operation is bounded, here and in the benchmark's repository.
	client, err := mongo.Connect(options.Client().ApplyURI(m.URI).SetTimeout(writeTimeout))
	if err != nil {
		return fmt.Errorf("mongo stand-in client: %w", err)
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	coll := client.Database(mongoDB).Collection(refdata.TableCustomers)
	if err := refdata.Generate(refdata.Size{}).LoadMongoCustomers(ctx, coll); err != nil {
		return err
	}

	cfg := catalog.Config{Source: refdata.FromMongo, Mongo: refdata.Mongo{URI: m.URI, DB: mongoDB}}
	svc, err := b.run.StartCommand(ctx, "catalog", serviceCPU, serviceMemMB, cfg.Command())
	if err != nil {
		return err
	}
	defer svc.Stop()
	meter := m.Proc().Measure()
	row, err := b.single(ctx, setup{key: catalogMongoKey, svc: svc, path: catalogPath, conns: compareConns}, b.t.run, true)
	if err != nil {
		return err
	}
	use := meter.Stop()
	row.Set(queriesPerRequest, 0)
	row.Set(mongoCores, use.CPUAvg)
	row.AddNote("the report's own source, but a %s; GET %s from memory, 0 queries per request; report (k6, 100 VUs): %.0f req/s; cores used: service %.2f of %.0f, stand-in %.2f, load generator %.2f, whole machine %.2f",
		standInLimits, catalogPath, *row.Ref.RPS, row.Value(labresult.CPUAvg), serviceCPU, use.CPUAvg, row.Value(loadgenCores), row.Value(machineCores))
	b.run.AddRow(row)

	if err := b.mongoFreshness(ctx, svc, coll, m); err != nil {
		return err
	}
	svc.Stop()
	return b.micro(ctx, m, client)
}

// mongoFreshness measures, through the catalog service, how long a write
// to the stand-in takes to be visible: with no other writes (the
// replica's own delay: the stand-in's 20 ms polling, a getMore, the
// apply), then under the Postgres freshness rows' write load (writeLoad,
// 1,000 single-document updates per second).
func (b *bench) mongoFreshness(ctx context.Context, svc *lab.Service, coll *mongo.Collection, m *deps.Mongo) error {
	t := b.t
	b.run.Progress.Step("freshness from the MongoDB stand-in: no other writes", t.quiet)
	if err := b.mongoProbes(ctx, svc, coll, m, freshMongoQuietKey, 0, 0, t.quiet); err != nil {
		return err
	}
	b.run.Progress.Step(fmt.Sprintf("freshness from the MongoDB stand-in: %d writes/s", writeRate), t.freshWarm+t.fresh)
	return b.mongoProbes(ctx, svc, coll, m, freshMongoKey, writeRate, t.freshWarm, t.fresh)
}

// mongoProbes puts rate updates per second on the stand-in (none at 0)
// for warm+window, and in the window probes, one at a time: set the probe
// customer's email, then ask the service for it every millisecond until
// it answers with it. The stand-in's change events carry whole-second
// commit times, so the service's own replica_lag_seconds would say
// little; a probe times from the write's send, so it includes the
// write's round trip and the 1 ms polling.
func (b *bench) mongoProbes(ctx context.Context, svc *lab.Service, coll *mongo.Collection, m *deps.Mongo, key labresult.Key, rate int, warm, window time.Duration) error {
	start := time.Now().Add(100 * time.Millisecond)
	from, to := start.Add(warm), start.Add(warm+window)
	rec := newLagRecorder(from, to)
	update := func(ctx context.Context, i int) error {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(i%refdata.DefaultCustomers + 1)}}, bson.D{
			{Key: "$inc", Value: bson.D{{Key: "credit_limit_cents", Value: int64(1)}}},
			{Key: "$set", Value: bson.D{{Key: "updated_at", Value: time.Now()}}},
		})
		return err
	}
	ws := &writeStats{}
	wdone := make(chan struct{})
	if rate > 0 {
		go func() { ws = writeLoad(ctx, rate, start, to, update); close(wdone) }()
	} else {
		close(wdone)
	}
	time.Sleep(time.Until(from))
	meter, svcMeter := m.Proc().Measure(), svc.Proc.Measure()
	probes, unseen, failed := 0, 0, 0
	for n := 0; ctx.Err() == nil && time.Now().Before(to); n++ {
		email := fmt.Sprintf("probe-%d-%d@lab.example", rate, n)
		sent := time.Now()
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(probeID)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: email}}}}); err != nil {
			failed++
			continue
		}
		probes++
		err := waitFor(ctx, probeLimit, func() bool {
			c, err := getCustomer(ctx, svc, probeID)
			return err == nil && c.Email == email
		})
		if err != nil {
			unseen++
			continue
		}
		rec.observe(sent, time.Now())
		time.Sleep(probeGap)
	}
	<-wdone
	mongoUse, svcUse := meter.Stop(), svcMeter.Stop()
	row := hdrRow(key, rec.h)
	row.Rate = float64(rate)
	row.Set(probesUnseen, float64(unseen))
	row.Set(mongoCores, mongoUse.CPUAvg)
	load := "no other writes"
	if rate > 0 {
		writes := ws.done.Load()
		row.Set(writesPerS, float64(writes)/(warm+window).Seconds())
		load = fmt.Sprintf("write load: %d updates in %v (%.0f/s), %d late by > %v, %d failed", writes, warm+window, row.Value(writesPerS), ws.late.Load(), lateAfter, ws.failed.Load())
	}
	row.AddNote("%d probes in %v (%d not visible within %v, %d writes failed), from the write's send to the service answering with it (polled every 1 ms; the Postgres rows time commit to visible inside the replica instead); %s; cores used in the window: stand-in %.2f of %.0f (%d CFS-throttled periods), catalog service %.2f",
		probes, window, unseen, probeLimit, failed, load, mongoUse.CPUAvg, mongoCPU, mongoUse.Throttled, svcUse.CPUAvg)
	// Where the time goes, where the figures tell: an applier that is
	// behind would keep the service's CPU busy.
	if rate > 0 && svcUse.CPUAvg < 0.2*serviceCPU {
		row.AddNote("the catalog service was nearly idle (%.2f CPU), so what the write load adds over the row with no other writes is not its applier's: it is the stand-in's, answering getMores that each scan its whole oplog, which every write grows",
			svcUse.CPUAvg)
	}
	row.AddNote("%s", standInLimits)
	b.run.AddRow(row)
	return nil
}

// benchStore is one store of the micro-benchmark: what it measured.
type benchStore struct {
	repo userrepo.Repo
	ns   []float64 // ns/op per run
	res  testing.BenchmarkResult
}

// micro runs internal/userrepo's benchmark loop (userrepo.GetBench)
// inside the lab process through testing.Benchmark: Get by random id of
// 10,000 users from the stand-in, from Redis (a real redis-server,
// started here) and from an in-memory replica the stand-in's change
// stream feeds, as the report's benchmark did; runs alternate between the
// stores so load from elsewhere falls on all alike.
func (b *bench) micro(ctx context.Context, m *deps.Mongo, client *mongo.Client) error {
	b.run.Progress.Step("micro-benchmark: start Redis, load the users", 3*time.Second)
	rs, err := deps.StartRedis(ctx, b.run.Sandbox, deps.RedisConfig{CPU: serviceCPU, MemoryMB: serviceMemMB})
	if err != nil {
		return err
	}
	defer rs.Stop()
	b.run.SetEnv("redis", rs.Kind)
	// go-redis's defaults bound each call: 5 s to dial, 3 s to read and write.
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer rc.Close()
	users := userrepo.Users(benchUsers, 1)
	if err := userrepo.LoadRedis(ctx, rc, users); err != nil {
		return err
	}
	ucoll := client.Database("userrepo").Collection("users")
	if err := userrepo.LoadMongo(ctx, ucoll, users); err != nil {
		return err
	}
	table := replica.NewTable[int64, userrepo.User]("users")
	src, err := replica.NewMongoSource(m.URI, "userrepo", []replica.Binding{userrepo.BindMongo(table)},
		replica.MongoLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { src.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = table.WaitReady(wctx)
	cancel()
	if err != nil {
		return fmt.Errorf("micro-benchmark: the replica did not load from the stand-in: %w", err)
	}

	// In microStores' order.
	stores := []*benchStore{
		{repo: userrepo.NewMongo(ucoll)},
		{repo: userrepo.NewRedis(rc)},
		{repo: userrepo.NewReplica(table)},
	}
	keys := userrepo.Keys(1<<16, benchUsers, 2)
	runs := b.run.Opts.Repeats()
	b.run.Progress.Step("micro-benchmark: Get from each store", time.Duration(runs*len(stores))*1500*time.Millisecond)
	for range runs {
		for i, s := range stores {
			res := testing.Benchmark(userrepo.GetBench(ctx, s.repo, keys))
			if res.N == 0 {
				return fmt.Errorf("micro-benchmark: Get %s failed (see the stores' logs)", microStores[i].store)
			}
			s.ns = append(s.ns, float64(res.T.Nanoseconds())/float64(res.N))
			s.res = res
		}
	}
	b.microRows(stores)
	return nil
}

// microRows adds a row of each store's Gets, then one of each store's
// ns/op over the in-memory replica's (the last store).
func (b *bench) microRows(stores []*benchStore) {
	for i, s := range stores {
		ns := labresult.Median(s.ns)
		row := lab.NewRow(microStores[i].key)
		row.Model, row.Connections, row.Runs, row.Requests = "closed", 1, len(s.ns), int64(s.res.N)
		row.RPS, row.MeanMS = labresult.F(1e9/ns), labresult.F(ns/1e6)
		row.RPSMin, row.RPSMax = labresult.F(1e9/slices.Max(s.ns)), labresult.F(1e9/slices.Min(s.ns))
		row.Set(nsPerOp, ns)
		row.Set(allocsPerOp, float64(s.res.AllocsPerOp()))
		row.Set(bytesPerOp, float64(s.res.AllocedBytesPerOp()))
		row.AddNote("testing.Benchmark of userrepo.GetBench in the lab process, one goroutine, %d users by random id: %.1f ns/op, %d allocs/op, %d B/op (median of %d runs, alternating stores; rps = Gets per second, mean = ns/op)",
			benchUsers, ns, s.res.AllocsPerOp(), s.res.AllocedBytesPerOp(), len(s.ns))
		if microStores[i].store == microMongo {
			row.AddNote("these are the stand-in's figures, not MongoDB's: %s", standInLimits)
		}
		b.run.AddRow(row)
	}
	memNS := labresult.Median(stores[len(stores)-1].ns)
	for i, s := range stores {
		if microStores[i].ratioKey == "" {
			continue
		}
		ratio := labresult.Median(s.ns) / memNS
		row := lab.NewRow(microStores[i].ratioKey)
		row.Runs = len(s.ns)
		row.Set(storeRatio, ratio)
		row.Set(storeReportRatio, microRatio)
		row.AddNote("%.0fx (10^%.1f) beside the report's \"about four orders of magnitude\" (10^4; its benchmark output is an image, so no per-op figures to compare)", ratio, math.Log10(ratio))
		b.run.AddRow(row)
	}
}
