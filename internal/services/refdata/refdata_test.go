package refdata_test

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

func TestMain(m *testing.M) { os.Exit(refdatatest.Main(m)) }

func TestGenerateIsDeterministicAndConsistent(t *testing.T) {
	a, b := refdata.Generate(refdatatest.Small), refdata.Generate(refdatatest.Small)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two seeds of the same size differ")
	}
	if len(a.Products) != refdatatest.Small.Products || len(a.Customers) != refdatatest.Small.Customers || len(a.Rules) != refdata.NumRules {
		t.Fatalf("sizes: %d products, %d customers, %d rules", len(a.Products), len(a.Customers), len(a.Rules))
	}
	in := func(id int32, n int) bool { return id >= 1 && int(id) <= n }
	for _, p := range a.Products {
		if !in(p.BrandID, refdata.NumBrands) || !in(p.CategoryID, refdata.NumCategories) {
			t.Fatalf("product %+v references a missing row", p)
		}
	}
	for _, c := range a.Cities {
		if !in(c.ZoneID, refdata.NumZones) || !in(c.GroupID, refdata.NumGroups) || c.Region == "" {
			t.Fatalf("city %+v references a missing row", c)
		}
	}
	for _, c := range a.Customers {
		if c.Region == "" || c.Name == "" {
			t.Fatalf("customer %+v has no region or name", c)
		}
	}
}

func TestDecoders(t *testing.T) {
	now := time.Now()
	good := replica.Row{"id": int32(7), "name": "Acme Trade LLC", "region": "Omsk", "email": "a@b", "phone": "+7",
		"credit_limit_cents": int64(100), "updated_at": now}
	with := func(k string, v any) replica.Row {
		r := replica.Row{}
		for k2, v2 := range good {
			r[k2] = v2
		}
		if v == nil {
			delete(r, k)
		} else {
			r[k] = v
		}
		return r
	}
	tests := []struct {
		name    string
		row     replica.Row
		wantErr string
	}{
		{"good", good, ""},
		{"wrong type", with("id", "7"), "column id is string, want int32"},
		{"missing column", with("email", nil), "column email is missing"},
		{"empty region", with("region", ""), "empty region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := refdata.DecodeCustomer(tt.row)
			if tt.wantErr == "" {
				if err != nil || c.ID != 7 || c.Region != "Omsk" || !c.UpdatedAt.Equal(now) {
					t.Fatalf("DecodeCustomer = %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := refdata.DecodeBrand(replica.Row{"id": int32(1), "name": "x", "markup_bp": int32(-5)}); err == nil {
		t.Error("a negative markup decoded")
	}
}

func TestInitTwiceKeepsTheSeed(t *testing.T) {
	_, pool := refdatatest.DB(t, refdatatest.Small)
	if err := refdata.Init(context.Background(), pool, refdatatest.Small); err != nil {
		t.Fatal(err)
	}
	var n int
	pool.QueryRow(context.Background(), "SELECT count(*) FROM products").Scan(&n)
	if n != refdatatest.Small.Products {
		t.Fatalf("%d products after a second Init, want %d", n, refdatatest.Small.Products)
	}
}

// TestReplicaFollowsAndSkipsBadRows runs both sets of tables over one
// database: they load, follow changes, and a row that does not decode is
// counted without stopping the applier or making the replica unready.
func TestReplicaFollowsAndSkipsBadRows(t *testing.T) {
	dsn, pool := refdatatest.DB(t, refdatatest.Small)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	ref, cust := refdata.NewRefTables(), refdata.NewCustomers()
	start := func(set refdata.Set, slot string, reg prometheus.Registerer) *refdata.Replica {
		db := refdata.DB{DSN: dsn}
		db.SetDefaults(slot)
		r, err := refdata.NewReplica(db, set, reg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Ready(); err == nil {
			t.Fatal("ready before loading")
		}
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return r
	}
	refRep := start(ref, "ref", prometheus.NewRegistry())
	custRep := start(cust, "cust", reg)
	testkit.Eventually(t, 20*time.Second, "replicas ready", func() bool {
		return refRep.Ready() == nil && custRep.Ready() == nil && refRep.Loaded() && custRep.Loaded()
	})
	if ref.Rules.Len() != refdata.NumRules || ref.Cities.Len() != refdata.NumCities || cust.Table.Len() != refdatatest.Small.Customers {
		t.Fatalf("loaded %d rules, %d cities, %d customers", ref.Rules.Len(), ref.Cities.Len(), cust.Table.Len())
	}
	if _, err := pool.Exec(ctx, `UPDATE brands SET markup_bp = 4321 WHERE id = 5`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "brand update visible", func() bool {
		b, _ := ref.Brands.Get(5)
		return b.MarkupBP == 4321
	})
	// One bad row and one good row in one transaction.
	if _, err := pool.Exec(ctx, `INSERT INTO customers VALUES
		(900001, 'Bad Region LLC', '', 'x@y', '+7', 0, now()),
		(900002, 'Good LLC', 'Omsk', 'x@y', '+7', 0, now())`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "good row visible", func() bool {
		_, ok := cust.Table.Get(900002)
		return ok
	})
	if _, ok := cust.Table.Get(900001); ok {
		t.Fatal("the row without a region was applied")
	}
	if n := testkit.MetricSum(t, reg, "replica_decode_errors_total", nil); n != 1 {
		t.Fatalf("replica_decode_errors_total = %v, want 1", n)
	}
	if err := custRep.Ready(); err != nil {
		t.Fatalf("a bad row made the replica unready: %v", err)
	}
	var observed uint64
	for _, m := range testkit.Family(t, reg, "replica_lag_seconds").GetMetric() {
		observed += m.GetHistogram().GetSampleCount()
	}
	if observed < 1 {
		t.Fatalf("replica_lag_seconds observed %d changes", observed)
	}
}

// TestReplicaPersistDir: with PersistDir, the services' tables (every
// value type of both sets) go to a file and come back from it at the next
// start, with what changed while the replica was down.
func TestReplicaPersistDir(t *testing.T) {
	dsn, pool := refdatatest.DB(t, refdatatest.Small)
	dir := t.TempDir()
	t.Cleanup(func() {
		pool.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('hlab_persist_ref', 'hlab_persist_cust')`)
	})
	start := func(set refdata.Set, service string, reg prometheus.Registerer) (*testkit.SyncBuffer, func()) {
		log := &testkit.SyncBuffer{}
		db := refdata.DB{DSN: dsn, PersistDir: dir}
		db.SetDefaults("persist_" + service)
		r, err := refdata.NewReplica(db, set, reg, slog.New(slog.NewTextHandler(log, nil)), 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		stop := sync.OnceFunc(func() { cancel(); <-done })
		t.Cleanup(stop)
		testkit.Eventually(t, 20*time.Second, service+" replica ready", func() bool { return r.Loaded() && r.Ready() == nil })
		return log, stop
	}
	_, stopRef := start(refdata.NewRefTables(), "ref", prometheus.NewRegistry())
	_, stopCust := start(refdata.NewCustomers(), "cust", prometheus.NewRegistry())
	stopRef()
	stopCust()
	if _, err := pool.Exec(context.Background(), `UPDATE brands SET markup_bp = 4321 WHERE id = 5`); err != nil {
		t.Fatal(err)
	}
	ref, cust := refdata.NewRefTables(), refdata.NewCustomers()
	reg := prometheus.NewRegistry()
	refLog, _ := start(ref, "ref", prometheus.NewRegistry())
	custLog, _ := start(cust, "cust", reg)
	for what, log := range map[string]*testkit.SyncBuffer{"ref": refLog, "cust": custLog} {
		if !strings.Contains(log.String(), "tables loaded from the restart file") {
			t.Errorf("the %s replica did not start from its file:\n%s", what, log)
		}
	}
	if cust.Table.Len() != refdatatest.Small.Customers || ref.Rules.Len() != refdata.NumRules {
		t.Errorf("from the files: %d customers, %d rules", cust.Table.Len(), ref.Rules.Len())
	}
	testkit.Eventually(t, 5*time.Second, "the update made while down", func() bool {
		b, _ := ref.Brands.Get(5)
		return b.MarkupBP == 4321
	})
	if n := testkit.MetricSum(t, reg, "replica_disk_start", map[string]string{"refused": ""}); n != 1 {
		t.Errorf("replica_disk_start{refused=\"\"} = %v, want 1", n)
	}
	if n := testkit.MetricSum(t, reg, "replica_persisted_lsn", nil); n <= 0 {
		t.Errorf("replica_persisted_lsn = %v, want the file's position", n)
	}
}

// TestPersistDirNeedsTheReplica: --persist-dir with a source it does not
// apply to is an error, not ignored.
func TestPersistDirNeedsTheReplica(t *testing.T) {
	for _, source := range []refdata.Source{refdata.FromPostgres, refdata.FromMongo} {
		c := refdata.Config{Source: source, DB: refdata.DB{PersistDir: t.TempDir()}}
		c.Mongo.URI = "mongodb://127.0.0.1:1"
		if err := c.SetDefaults("catalog"); err == nil || !strings.Contains(err.Error(), "--source replica") {
			t.Errorf("--source %s with --persist-dir: %v", source, err)
		}
	}
}
