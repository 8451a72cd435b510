package grafana_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/deploy/grafana"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/refdata"
	"github.com/highload-lab/hlab/internal/services/refdata/refdatatest"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/testkit"
)

// One real Postgres and one kfake serve the package's tests.
func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// servedBy names the services each dashboard shows; every service's
// /metrics must export every metric the dashboard uses.
var servedBy = map[string][]string{
	"tasks.json":   {"tasks"},
	"databus.json": {"databus"},
	"replica.json": {"catalog", "pricing"},
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestDashboardsShape(t *testing.T) {
	files, err := grafana.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for name, b := range files {
		d, err := grafana.Parse(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share the uid %q", name, other, d.UID)
		}
		uids[d.UID] = name
		if _, ok := servedBy[name]; !ok {
			t.Errorf("%s: no service is named for it in servedBy, so nothing checks its metrics", name)
		}
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		for _, v := range []string{"datasource", "job", "instance"} {
			if !vars[v] {
				t.Errorf("%s: no $%s variable", name, v)
			}
		}
		if _, err := d.Metrics(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name := range servedBy {
		if _, ok := files[name]; !ok {
			t.Errorf("servedBy names %s, which is not a dashboard here", name)
		}
	}
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`rate(http_requests_total{job=~"$job", code=~"5.."}[$__rate_interval])`, []string{"http_requests_total"}},
		{`histogram_quantile(0.99, sum by (le, path) (rate(http_request_duration_seconds_bucket{instance=~"${instance:regex}"}[5m])))`,
			[]string{"http_request_duration_seconds_bucket"}},
		{`sum(rate(a_total[1m])) by (job) / on (job) group_left (instance) sum without (x) (b_total offset 5m)`, []string{"a_total", "b_total"}},
		{`label_replace(up, "dst", "a{b}", "src", "(.*)") and max_over_time(c:rule[10m:1m]) > bool 1e3`, []string{"up", "c:rule"}},
		{`topk(5, x) unless y or z{l="it's \"quoted\""}`, []string{"x", "y", "z"}},
		{`vector(1) + time()`, nil},
		{`count without (instance) (up) > 0`, []string{"up"}},
	} {
		got, err := grafana.MetricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%s) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`rte(x[5m])`, `{__name__="x"}`, `x{l="unterminated}`, `sum(x`} {
		if got, err := grafana.MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%s) = %q, want an error", bad, got)
		}
	}
}

// TestMissingFindsABogusMetric: the check the services' test relies on
// does find a metric that a service does not export, and a dashboard
// without what Parse requires is refused.
func TestMissingFindsABogusMetric(t *testing.T) {
	fake := []byte(`{"uid": "fake", "title": "fake", "panels": [{"type": "row", "panels": [
		{"type": "timeseries", "targets": [{"expr": "sum(rate(http_requests_total[5m])) / sum(rate(hlab_no_such_metric_total[5m]))"}]}]}]}`)
	d, err := grafana.Parse(fake)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := d.Missing(map[string]bool{"http_requests_total": true})
	if err != nil || !slices.Equal(missing, []string{"hlab_no_such_metric_total"}) {
		t.Fatalf("Missing = %q, %v; want the bogus metric", missing, err)
	}
	for _, bad := range []string{`{"title": "t", "panels": [{"targets": [{"expr": "up"}]}]}`, `{"uid": "u", "panels": [{"targets": [{"expr": "up"}]}]}`,
		`{"uid": "u", "title": "t", "panels": [{"type": "text"}]}`, `{"uid": "u",`} {
		if _, err := grafana.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) = nil error", bad)
		}
	}
}

// TestDashboardsMatchServices starts each real service the way "hlab
// serve" does (its Serve function, on real Postgres and kfake), drives a
// little traffic so its labelled counters and histograms have series,
// scrapes its /metrics, and checks every metric its dashboards and alert
// rules use is there. Then a real Prometheus scrapes them all and
// evaluates every query of every dashboard (evaluateThroughPrometheus): the
// services run for the whole test.
func TestDashboardsMatchServices(t *testing.T) {
	files, err := grafana.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	start := map[string]func(*testing.T) string{
		"tasks": startTasks, "databus": startGateway, "catalog": startCatalog, "pricing": startPricing,
	}
	bases := map[string]string{}
	for _, svc := range slices.Sorted(maps.Keys(start)) {
		bases[svc] = start[svc](t)
	}
	dashboards := map[string]*grafana.Dashboard{}
	for name, services := range servedBy {
		d, err := grafana.Parse(files[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dashboards[name] = d
		for _, svc := range services {
			t.Run(svc+"/"+name, func(t *testing.T) {
				exported := exportedNames(testkit.Scrape(t, bases[svc]+"/metrics"))
				missing, err := d.Missing(exported)
				if err != nil {
					t.Fatal(err)
				}
				if len(missing) > 0 {
					t.Errorf("%s uses metrics that %s does not export: %s", name, svc, strings.Join(missing, ", "))
				}
				used, _ := d.Metrics()
				t.Logf("%s uses %d metrics: %s", name, len(used), strings.Join(used, " "))
			})
		}
	}
	severalInstances := startSeveralInstanceTasks(t)
	for file, services := range alertedBy {
		for _, svc := range services {
			t.Run(svc+"/"+file, func(t *testing.T) {
				exported := exportedNames(testkit.Scrape(t, bases[svc]+"/metrics"))
				if svc == "tasks" {
					maps.Copy(exported, exportedNames(testkit.Scrape(t, severalInstances+"/metrics")))
				}
				exported["up"] = true // Prometheus' own, per target
				missing, err := alertMetricsMissing(t, file, exported)
				if err != nil {
					t.Fatal(err)
				}
				if len(missing) > 0 {
					t.Errorf("%s's rules use metrics that %s does not export: %s", file, svc, strings.Join(missing, ", "))
				}
			})
		}
	}
	t.Run("prometheus", func(t *testing.T) { evaluateThroughPrometheus(t, dashboards, bases) })
}

// exportedNames are the series names a scrape holds: a histogram family
// h is h_bucket, h_sum and h_count; a summary s is s, s_sum and s_count.
func exportedNames(mfs map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// serve runs a service's Serve on a listener of its own until the test
// ends, and returns its base URL once /healthz answers.
func serve(t *testing.T, what string, timeout time.Duration, run func(ctx context.Context, srv server.Config) error) string {
	t.Helper()
	ln := testkit.Listen(t)
	testkit.Background(t, what, func(ctx context.Context) error {
		return run(ctx, server.Config{Listener: ln, Logger: quiet})
	})
	base := "http://" + ln.Addr().String()
	testkit.Healthy(t, timeout, base+"/healthz")
	return base
}

func newDatabase(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("d%d", rand.Int64())
	pg := depstest.Postgres(t)
	if err := pg.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return pg.DSN(name)
}

// call sends a request and returns the status and body; a body is JSON.
func call(t *testing.T, method, url, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, answer := testkit.Do(t, req)
	return resp.StatusCode, []byte(answer)
}

func startTasks(t *testing.T) string { return startTasksWith(t, func(*tasks.Config) {}) }

// startSeveralInstanceTasks starts the task API with the options a team
// on several instances turns on (task events through Postgres, the
// notification outbox): they export metrics of their own, which alert
// rules watch, in place of the in-memory queue's.
func startSeveralInstanceTasks(t *testing.T) string {
	return startTasksWith(t, func(c *tasks.Config) { c.Events, c.NotifyOutbox = tasks.EventsPostgres, true })
}

func startTasksWith(t *testing.T, options func(*tasks.Config)) string {
	dsn := newDatabase(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	t.Cleanup(hook.Close)
	base := serve(t, "tasks", 30*time.Second, func(ctx context.Context, srv server.Config) error {
		// The test scrapes the one address it serves: /metrics there too.
		cfg := tasks.Config{DatabaseURL: dsn, BcryptCost: 4, WebhookURL: hook.URL, Logger: quiet}
		options(&cfg)
		return tasks.Serve(ctx, srv, tasks.Options{LogFormat: "text", DrainTimeout: 2 * time.Second, PublicMetrics: true, Config: cfg})
	})
	creds := map[string]string{"email": "dash@example.com", "password": "dashboard password"}
	if code, b := call(t, "POST", base+"/v1/auth/signup", "", creds); code != 201 {
		t.Fatalf("signup: %d %s", code, b)
	}
	code, b := call(t, "POST", base+"/v1/auth/login", "", creds)
	var s struct{ Token string }
	if json.Unmarshal(b, &s); code != 200 || s.Token == "" {
		t.Fatalf("login: %d %s", code, b)
	}
	call(t, "POST", base+"/v1/auth/login", "", map[string]string{"email": creds["email"], "password": "wrong password"})
	if code, b := call(t, "POST", base+"/v1/devices", s.Token, map[string]string{"platform": "web", "push_token": "tok"}); code != 201 {
		t.Fatalf("device: %d %s", code, b)
	}
	for i := range 5 {
		if code, b := call(t, "POST", base+"/v1/tasks", s.Token, map[string]any{"title": fmt.Sprintf("task %d", i)}); code != 201 {
			t.Fatalf("create: %d %s", code, b)
		}
	}
	call(t, "GET", base+"/v1/tasks", s.Token, nil)
	call(t, "GET", base+"/v1/tasks/999999", s.Token, nil)
	call(t, "GET", base+"/v1/tasks", "", nil)
	// A notification went through the queue to the webhook.
	testkit.Eventually(t, 10*time.Second, "a notification delivered", func() bool {
		return testkit.SumFamily(testkit.Scrape(t, base+"/metrics")["tasks_notify_jobs_total"], map[string]string{"result": "delivered"}) > 0
	})
	return base
}

func startGateway(t *testing.T) string {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := depstest.Topic(t, k, 2)
	grpcAddr := testkit.FreeAddr(t)
	base := serve(t, "databus", 30*time.Second, func(ctx context.Context, srv server.Config) error {
		return gateway.Serve(ctx, srv, gateway.Options{GRPCAddr: grpcAddr, DrainTimeout: 2 * time.Second, Config: gateway.Config{
			Brokers: k.Brokers, MaxStreams: 3, MaxMessageBytes: 1024, CommitInterval: 50 * time.Millisecond,
			LagInterval: 50 * time.Millisecond,
		}})
	})
	c, err := databus.Dial(grpcAddr, databus.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := c.NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range 5 {
		if err := pub.Publish(ctx, databus.Message{Key: fmt.Appendf(nil, "%d", i), Value: []byte("value")}); err != nil {
			t.Fatal(err)
		}
	}
	// A record over --max-message-bytes: a publish error.
	if err := pub.Publish(ctx, databus.Message{Value: make([]byte, 2048)}); err == nil {
		t.Fatal("a message over MaxMessageBytes was stored")
	}
	// A topic that does not exist: a stream ended with NotFound.
	if missing, err := c.NewPublisher(ctx, "no-such-topic"); err == nil {
		missing.Publish(ctx, databus.Message{Value: []byte("x")})
		missing.Close()
	}
	sub, err := c.OpenSubscription(context.WithoutCancel(ctx), topic, depstest.Group(t))
	if err != nil {
		t.Fatal(err)
	}
	// Open while the dashboard's metrics are read, past this function's
	// ctx: the per-group series exist only while the gateway serves the
	// group.
	t.Cleanup(func() { sub.Close() })
	for got := 0; got < 5; {
		b, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Ack(b.Messages...); err != nil {
			t.Fatal(err)
		}
		got += len(b.Messages)
	}
	testkit.Eventually(t, 10*time.Second, "an offset commit", func() bool {
		return testkit.SumFamily(testkit.Scrape(t, base+"/metrics")["databus_commits_total"], nil) > 0
	})
	testkit.Eventually(t, 10*time.Second, "a reading of the group's lag", func() bool {
		return testkit.Scrape(t, base+"/metrics")["databus_consumer_lag"] != nil
	})
	// Two more streams pass --max-streams (3): a refusal.
	for range 2 {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		if p, err := c.NewPublisher(rctx, topic); err == nil {
			p.Publish(rctx, databus.Message{Value: []byte("x")})
			defer p.Close()
		}
		rcancel()
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool {
		return testkit.SumFamily(testkit.Scrape(t, base+"/metrics")["databus_refusals_total"], nil) > 0
	})
	return base
}

// refdataDB is a database seeded for catalog and pricing.
func refdataDB(t *testing.T) (string, *pgxpool.Pool) {
	dsn := newDatabase(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := refdata.Init(context.Background(), pool, refdatatest.Small); err != nil {
		t.Fatal(err)
	}
	return dsn, pool
}

// replicaTraffic changes a row of table and waits for the service's
// replica to apply it (a lag observation), after the given GETs.
func replicaTraffic(t *testing.T, base string, pool *pgxpool.Pool, update string, gets ...string) {
	for _, g := range gets {
		// /healthz answers once the replica is loaded, a moment before
		// its source first confirms every table current: until then a
		// read answers 503 (stale).
		testkit.EventuallyNil(t, 20*time.Second, "GET "+g+" answered 200", func() error {
			if code, b := call(t, "GET", base+g, "", nil); code != 200 {
				return fmt.Errorf("%d %s", code, b)
			}
			return nil
		})
	}
	call(t, "GET", base+"/no-such-route", "", nil)
	if _, err := pool.Exec(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the change applied in the replica", func() bool {
		return testkit.SumFamily(testkit.Scrape(t, base+"/metrics")["replica_applied_changes_total"], nil) > 0
	})
}

func startCatalog(t *testing.T) string {
	dsn, pool := refdataDB(t)
	base := serve(t, "catalog", 60*time.Second, func(ctx context.Context, srv server.Config) error {
		return catalog.Serve(ctx, srv, catalog.Config{DB: refdata.DB{DSN: dsn, Slot: "dash_catalog", Publication: "dash_catalog"}, Logger: quiet})
	})
	replicaTraffic(t, base, pool, `UPDATE customers SET name = name || ' jr' WHERE id = 1`,
		"/customers/1", "/customers?region="+refdata.Regions[0]+"&limit=5")
	return base
}

func startPricing(t *testing.T) string {
	dsn, pool := refdataDB(t)
	base := serve(t, "pricing", 60*time.Second, func(ctx context.Context, srv server.Config) error {
		return pricing.Serve(ctx, srv, pricing.Config{DB: refdata.DB{DSN: dsn, Slot: "dash_pricing", Publication: "dash_pricing"}, Logger: quiet})
	})
	replicaTraffic(t, base, pool, `UPDATE brands SET markup_bp = markup_bp + 1 WHERE id = 1`, "/price?product=1&city=1")
	return base
}

// TestScrapeConfigNamesTheJobs: prometheus.yml scrapes a job named for
// each service the dashboards show (the job variables default to these
// names), so they show data as imported.
func TestScrapeConfigNamesTheJobs(t *testing.T) {
	cfg, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, services := range servedBy {
		for _, svc := range services {
			if !bytes.Contains(cfg, []byte("job_name: "+svc+"\n")) {
				t.Errorf("prometheus.yml has no job %q", svc)
			}
		}
	}
}
