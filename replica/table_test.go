package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/highload-lab/hlab/internal/testkit"
)

type customer struct {
	ID     int
	Name   string
	Region string
}

func byRegionName(a, b customer) bool {
	if a.Region != b.Region {
		return a.Region < b.Region
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.ID < b.ID
}

func up(c customer) Change[int, customer] {
	return Change[int, customer]{Op: Upsert, Key: c.ID, Value: c}
}
func del(id int) Change[int, customer] { return Change[int, customer]{Op: Delete, Key: id} }

func TestTableApplyAndIndex(t *testing.T) {
	tb := NewTable[int, customer]("customers")
	ix := NewIndex(tb, byRegionName)
	tb.replace(map[int]customer{1: {1, "Zed", "north"}, 2: {2, "Amy", "north"}, 3: {3, "Bob", "south"}}, time.Now())
	tb.apply([]Change[int, customer]{
		up(customer{4, "Cat", "north"}),
		up(customer{2, "Amy", "south"}), // moves region: the index must move it
		del(3),
		del(99), // unknown: nothing happens
	})
	if tb.Len() != 3 {
		t.Fatalf("Len %d, want 3", tb.Len())
	}
	if _, ok := tb.Get(3); ok {
		t.Fatal("deleted row still there")
	}
	if c, ok := tb.Get(2); !ok || c.Region != "south" {
		t.Fatalf("Get(2) = %+v %v", c, ok)
	}
	var north []string
	ix.AscendFrom(customer{Region: "north"}, func(c customer) bool {
		if c.Region != "north" {
			return false
		}
		north = append(north, c.Name)
		return true
	})
	if fmt.Sprint(north) != "[Cat Zed]" {
		t.Fatalf("north sorted by name = %v, want [Cat Zed]", north)
	}
	if ix.Len() != 3 {
		t.Fatalf("index Len %d", ix.Len())
	}
}

// TestDeltaMerge pushes enough writes to merge the delta into the base
// several times and checks every row against a plain map.
func TestDeltaMerge(t *testing.T) {
	tb := NewTable[int, customer]("c")
	want := map[int]customer{}
	for i := range 5000 {
		c := customer{ID: i % 1500, Name: strconv.Itoa(i)}
		ch := up(c)
		if i%7 == 0 {
			ch = del(c.ID)
			delete(want, c.ID)
		} else {
			want[c.ID] = c
		}
		tb.apply([]Change[int, customer]{ch})
	}
	if tb.Len() != len(want) {
		t.Fatalf("Len %d, want %d", tb.Len(), len(want))
	}
	for id, c := range want {
		if got, ok := tb.Get(id); !ok || got != c {
			t.Fatalf("Get(%d) = %+v %v, want %+v", id, got, ok, c)
		}
	}
	seen := 0
	tb.Range(func(id int, c customer) bool { seen++; return true })
	if seen != len(want) {
		t.Fatalf("Range saw %d rows, want %d", seen, len(want))
	}
}

// TestReadersSeeWholeBatches: a batch moves a "token" between two rows;
// a reader must never see both rows with it or neither.
func TestReadersSeeWholeBatches(t *testing.T) {
	tb := NewTable[int, customer]("c")
	tb.replace(map[int]customer{1: {1, "token", ""}, 2: {2, "", ""}}, time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var bad error
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				// Range reads one version; two Gets could straddle a batch.
				holders := 0
				tb.Range(func(_ int, c customer) bool {
					if c.Name == "token" {
						holders++
					}
					return true
				})
				if holders != 1 {
					mu.Lock()
					bad = fmt.Errorf("a reader saw the token %d times", holders)
					mu.Unlock()
					return
				}
			}
		})
	}
	for i := 0; ctx.Err() == nil; i++ {
		from, to := 1+i%2, 2-i%2
		tb.apply([]Change[int, customer]{up(customer{from, "", ""}), up(customer{to, "token", ""})})
	}
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
}

func TestReadiness(t *testing.T) {
	tb := NewTable[int, customer]("c")
	if tb.Ready() {
		t.Fatal("ready before any load")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	boom := errors.New("replication stream broke")
	tb.setReady(boom)
	if err := tb.WaitReady(ctx); !errors.Is(err, boom) {
		t.Fatalf("WaitReady = %v, want the source's error", err)
	}
	go tb.setReady(nil)
	if err := tb.WaitReady(context.Background()); err != nil || !tb.Ready() || tb.Err() != nil {
		t.Fatalf("WaitReady = %v, ready %v, err %v", err, tb.Ready(), tb.Err())
	}
}

func TestOnChange(t *testing.T) {
	tb := NewTable[int, customer]("c")
	var got []Op
	tb.OnChange(func(c Change[int, customer]) { got = append(got, c.Op) })
	tb.replace(map[int]customer{}, time.Time{})
	tb.apply([]Change[int, customer]{up(customer{ID: 1}), del(1)})
	if fmt.Sprint(got) != "[2 0 1]" {
		t.Fatalf("hooks saw %v, want Reload, Upsert, Delete", got)
	}
}

// BenchmarkGet reads random keys of a 10k-row table, with an empty delta
// (after a load or merge) and with changes pending in the delta.
func BenchmarkGet(b *testing.B) {
	for _, pending := range []int{0, 50} {
		b.Run(fmt.Sprintf("delta=%d", pending), func(b *testing.B) {
			tb := NewTable[int, customer]("c")
			rows := map[int]customer{}
			for i := range 10000 {
				rows[i] = customer{ID: i, Name: "n" + strconv.Itoa(i)}
			}
			tb.replace(rows, time.Time{})
			for i := range pending {
				tb.apply([]Change[int, customer]{up(customer{ID: i * 7, Name: "changed"})})
			}
			keys := rand.Perm(10000)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := tb.Get(keys[i%len(keys)]); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}

// TestTruncateIsOneVersion: a transaction that truncates a table and
// writes rows becomes visible at once, like any other: readers never see
// the empty table between the TRUNCATE and the rows after it.
func TestTruncateIsOneVersion(t *testing.T) {
	tb := NewTable[int, customer]("c")
	ix := NewIndex(tb, byRegionName)
	b := Bind(tb,
		func(r Row) (int, error) { return r["id"].(int), nil },
		func(r Row) (customer, error) { return customer{ID: r["id"].(int), Region: "r"}, nil })
	b.beginLoad(rowShape{})
	for id := 1; id <= 3; id++ {
		b.loadRow(Row{"id": id})
	}
	b.finishLoad(time.Now())
	var seen []string
	tb.OnChange(func(c Change[int, customer]) {
		// Hooks run once the change is visible: what a reader sees now.
		seen = append(seen, fmt.Sprintf("op %d: %d rows, %d indexed", c.Op, tb.Len(), ix.Len()))
	})
	b.truncate()
	b.upsert(Row{"id": 10})
	b.upsert(Row{"id": 11})
	b.remove(Row{"id": 10})
	b.flush(time.Now())
	want := []string{"op 2: 1 rows, 1 indexed", "op 0: 1 rows, 1 indexed", "op 0: 1 rows, 1 indexed", "op 1: 1 rows, 1 indexed"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("readers saw %q, want %q", seen, want)
	}
	if _, ok := tb.Get(11); !ok || tb.Len() != 1 || tb.Stats().Applied != 3 {
		t.Fatalf("after the transaction: %d rows, 11 present %v, %d applied", tb.Len(), ok, tb.Stats().Applied)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := NewTable[int, customer]("customers")
	if err := RegisterMetrics(reg, tb); err != nil {
		t.Fatal(err)
	}
	tb.replace(map[int]customer{1: {ID: 1}}, time.Now())
	tb.setReady(nil)
	tb.apply([]Change[int, customer]{{Op: Upsert, Key: 2, Value: customer{ID: 2}, Commit: time.Now().Add(-5 * time.Millisecond)}})
	for name, want := range map[string]float64{"replica_rows": 2, "replica_ready": 1, "replica_applied_changes_total": 1} {
		if got := testkit.MetricSum(t, reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "replica_lag_seconds"); n != 1 {
		t.Errorf("lag histogram series = %d, want 1", n)
	}
}
