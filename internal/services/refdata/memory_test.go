package refdata_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/testkit"
	"github.com/highload-lab/hlab/replica"
)

// TestBytesPerRowBounded loads the catalog's customers (with their
// listing index) and the pricing's reference tables, and bounds each
// table's estimated bytes per row, as exported in
// replica_table_bytes_per_row, at about 1.5 times what it is today
// (customers 558 with their index and the held copies of their text
// columns, brands 146, cities 210, price rules 32): a change that doubles
// a row's memory fails here.
func TestBytesPerRowBounded(t *testing.T) {
	dsn, _ := refdatatest.DB(t, refdatatest.Small)
	ctx, cancel := context.WithCancel(context.Background())
	ref, cust := refdata.NewRefTables(), refdata.NewCustomers()
	reg := prometheus.NewRegistry()
	var reps []*refdata.Replica
	var done []chan struct{}
	for _, set := range []struct {
		s    refdata.Set
		slot string
		reg  prometheus.Registerer
	}{{ref, "mem_ref", prometheus.NewRegistry()}, {cust, "mem_cust", reg}} {
		db := refdata.DB{DSN: dsn}
		db.SetDefaults(set.slot)
		r, err := refdata.NewReplica(db, set.s, set.reg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan struct{})
		go func() { r.Run(ctx); close(ch) }()
		reps, done = append(reps, r), append(done, ch)
	}
	t.Cleanup(func() {
		cancel()
		for _, ch := range done {
			<-ch
		}
	})
	testkit.Eventually(t, 30*time.Second, "replicas ready", func() bool { return reps[0].Ready() == nil && reps[1].Ready() == nil })
	for _, tt := range []struct {
		name  string
		stats replica.Stats
		bound float64
	}{
		{"customers", cust.Table.Stats(), 850},
		{"brands", ref.Brands.Stats(), 220},
		{"cities", ref.Cities.Stats(), 320},
		{"price_rules", ref.Rules.Stats(), 50},
	} {
		st := tt.stats
		t.Logf("%s: %d rows, %d bytes, %.1f a row", tt.name, st.Rows, st.Bytes, st.BytesPerRow)
		if st.BytesPerRow <= 0 || st.BytesPerRow > tt.bound {
			t.Errorf("%s: %.1f bytes a row, want within (0, %.0f]", tt.name, st.BytesPerRow, tt.bound)
		}
	}
	if got, want := testkit.MetricSum(t, reg, "replica_table_bytes_per_row", nil), cust.Table.Stats().BytesPerRow; got != want {
		t.Errorf("replica_table_bytes_per_row = %v, want Stats' %v", got, want)
	}
}
