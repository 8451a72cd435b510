package crudexp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/tasksload"
	"github.com/highload-lab/hlab/loadgen"
)

// instance is one configuration's running service, with the scenario its
// VUs run (a VU's task lives in that service's database) and its
// devices' WebSockets.
type instance struct {
	cfg   variant
	svc   *lab.Service
	sc    *tasksload.Scenario
	watch *watcher
}

// startServices starts every configuration once, signs the accounts in
// and opens their WebSockets: all on, the variants, optimization 6 off,
// all off.
func (b *bench) startServices(ctx context.Context) error {
	b.secret = filepath.Join(b.run.Opts.WorkDir, "crud", "token-secret")
	if err := writeSecret(b.secret); err != nil {
		return err
	}
	for _, v := range configs() {
		b.run.Progress.Step(v.label+": start the service", 3*time.Second)
		svc, err := b.startTasks(ctx, v)
		if err != nil {
			return err
		}
		b.svcs[v.key] = &instance{cfg: v, svc: svc}
	}
	b.run.UsedInFirstClaim(itemPool, poolItem(b.taskConfig(on), b.taskConfig(off)))
	// Accounts have the same ids in both databases, and every service the
	// same secret: one sign-in serves them all.
	b.run.Progress.Step("sign in the accounts (bcrypt)", 3*time.Second)
	if err := b.sc.SignIn(ctx, "http://"+b.svcs[allOnKey].svc.Addr, vus); err != nil {
		return err
	}
	for _, v := range configs() {
		in := b.svcs[v.key]
		var err error
		if in.watch, err = watch(ctx, in.svc.Addr, b.sc, vus/devicesPerUser); err != nil {
			return err
		}
		in.sc = b.sc.Clone()
	}
	b.rich = b.sc.Clone()
	b.rich.Lists = true
	return nil
}

// startTasks starts "hlab serve tasks" in configuration v, under the
// report's quota, on the database with or without the indexes as v says.
// It is the one place the lab hands the service its database and token
// secret.
func (b *bench) startTasks(ctx context.Context, v variant) (*lab.Service, error) {
	o := tasks.Options{
		Config:     b.taskConfig(v),
		SecretFile: b.secret, LogFormat: "json", PublicMetrics: true, // the lab scrapes them beside the API
	}
	if v.key == allOnKey || v.key == allOffKey {
		b.run.UsedInFirstClaim(itemInstance, instanceText(serviceCPU, serviceMemMB))
	}
	return b.run.StartCommand(ctx, "tasks", serviceCPU, serviceMemMB, o.Command())
}

// taskConfig is the service's configuration v: its database (with or
// without the indexes), the lab's sinks, and v's switches.
func (b *bench) taskConfig(v variant) tasks.Config {
	return tasks.Config{DatabaseURL: b.dsns[!v.deopt.NoIndexes], WebhookURL: b.hook.url, OTLPEndpoint: b.hook.otlpURL,
		BcryptCost: bcryptCost, Deopt: v.deopt, TokenAudience: "crud"}
}

// writeSecret writes a random token signing secret that every service
// shares, so that one sign-in serves them all.
func writeSecret(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hex.EncodeToString(b)), 0o600)
}

func (b *bench) stopServices() {
	for _, in := range b.svcs {
		if in.watch != nil {
			in.watch.stop()
		}
	}
	for _, in := range b.svcs {
		in.svc.Stop()
	}
}

// measurement is row key on configuration cfg under scenario sc.
func (b *bench) measurement(key, cfg labresult.Key, sc *tasksload.Scenario, d time.Duration, load ...loadgen.Option) lab.Measurement {
	svc := b.svcs[cfg].svc
	metrics := svc.URL("/metrics")
	return lab.Measurement{
		Key: key, Duration: d,
		Procs:   []*sandbox.Process{svc.Proc},
		Metrics: []string{metrics},
		Counters: []lab.Counter{
			{Metric: dbDials, URL: metrics, Name: "tasks_db_pool_dials_total"},
			{Metric: webhookCalls, URL: metrics, Name: "tasks_notify_attempts_total"},
		},
		Driver: lab.HTTP{URL: svc.URL("/"), Load: append([]loadgen.Option{loadgen.WithScenario(sc), loadgen.Timeout(30 * time.Second)}, load...)},
	}
}

// sampled is what around sampled beside a row's runs, and the
// configuration it ran on.
type sampled struct {
	cfg    variant
	pgCPU  float64 // summed over runs
	pgRuns int
	ws     int64 // WebSocket events
	otlp   int64 // bytes the OTLP sink received
}

// around wraps a measured run of row key on configuration cfg: Postgres,
// outside the quota, is sampled beside it (its CPU says where the rest
// went), and the WebSocket events the configuration's devices received
// and the trace bytes the OTLP sink received are counted (spans are
// exported in batches, up to 5 s late: a few of the previous row's may
// count).
func (b *bench) around(key, cfg labresult.Key, measure func() error) error {
	in := b.svcs[cfg]
	s := b.sampled[key]
	if s == nil {
		s = &sampled{cfg: in.cfg}
		b.sampled[key] = s
	}
	events, traced := in.watch.events.Load(), b.hook.otlpBytes.Load()
	var m *sandbox.Meter
	if p := b.pg.Proc(); p != nil {
		m = p.Measure()
	}
	err := measure()
	if m != nil {
		s.pgCPU += m.Stop().CPUAvg
		s.pgRuns++
	}
	s.ws += in.watch.events.Load() - events
	s.otlp += b.hook.otlpBytes.Load() - traced
	return err
}

// measure measures m, a row that runs alone (lab.Run.Measure), on
// configuration cfg, and keeps its row.
func (b *bench) measure(ctx context.Context, cfg labresult.Key, m lab.Measurement) (*labresult.Row, error) {
	var row *labresult.Row
	err := b.around(m.Key, cfg, func() error {
		var err error
		row, err = b.run.Measure(ctx, m)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.rows[m.Key] = row
	return row, nil
}
