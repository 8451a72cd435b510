package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Report C's second fix was to cap the telemetry pipeline, which had
// starved the API. Here traces are sampled (1% by default), spans wait in
// a bounded queue and are dropped when it is full rather than block a
// request, and export runs in the background in batches. With the cap off
// (Deopt.UncappedTelemetry) every request is traced and a full queue
// blocks the request that ends a span: the cost of keeping every span.
// The queue has the same bound either way.
const (
	spanQueue     = 2048
	spanBatch     = 512
	spanBatchWait = 5 * time.Second
)

// newTracing returns the tracer provider: exporting over OTLP/HTTP when an
// endpoint is configured, else only making ids for the logs.
func newTracing(ctx context.Context, cfg *Config) (*sdktrace.TracerProvider, bool, error) {
	var exp sdktrace.SpanExporter
	export := cfg.OTLPEndpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if export {
		var eo []otlptracehttp.Option
		switch ep := cfg.OTLPEndpoint; {
		case strings.Contains(ep, "://"):
			eo = append(eo, otlptracehttp.WithEndpointURL(ep))
		case ep != "":
			eo = append(eo, otlptracehttp.WithEndpoint(ep), otlptracehttp.WithInsecure())
		}
		var err error
		if exp, err = otlptracehttp.New(ctx, eo...); err != nil {
			return nil, false, fmt.Errorf("tasks: OTLP trace exporter: %w", err)
		}
	}
	return sdktrace.NewTracerProvider(tracingOptions(cfg, exp)...), export, nil
}

// tracingOptions are the provider's sampler and span pipeline under the
// telemetry budget (or without it); exp nil: no export.
func tracingOptions(cfg *Config, exp sdktrace.SpanExporter) []sdktrace.TracerProviderOption {
	sampler := sdktrace.TraceIDRatioBased(cfg.TraceSample)
	batch := []sdktrace.BatchSpanProcessorOption{
		sdktrace.WithMaxQueueSize(spanQueue), sdktrace.WithMaxExportBatchSize(spanBatch),
		sdktrace.WithBatchTimeout(spanBatchWait),
	}
	if cfg.Deopt.UncappedTelemetry {
		sampler = sdktrace.AlwaysSample()
		batch = append(batch, sdktrace.WithBlocking())
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.ParentBased(sampler)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "tasks"))),
	}
	if exp != nil {
		opts = append(opts, sdktrace.WithBatcher(exp, batch...))
	}
	return opts
}

// traceLogs adds the trace and span ids of a log call's context to its
// record, so a log line leads to its trace.
type traceLogs struct{ slog.Handler }

func (h traceLogs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLogs) WithAttrs(as []slog.Attr) slog.Handler { return traceLogs{h.Handler.WithAttrs(as)} }
func (h traceLogs) WithGroup(name string) slog.Handler    { return traceLogs{h.Handler.WithGroup(name)} }

// dbTracer makes a child span per statement of a sampled request.
type dbTracer struct{ tracer trace.Tracer }

func (t dbTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	sql := d.SQL
	if len(sql) > 200 {
		sql = sql[:200]
	}
	ctx, _ = t.tracer.Start(ctx, "db.query", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.statement", sql)))
	return ctx
}

func (t dbTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if d.Err != nil {
		span.RecordError(d.Err)
		span.SetStatus(codes.Error, d.Err.Error())
	}
	span.End()
}

// metrics are the service's own, beside the shared server's request rate
// and latency by route, and the Go runtime's (goroutines, memory).
type metrics struct {
	signups        prometheus.Counter
	signupsLimited prometheus.Counter
	logins         *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, p pool) *metrics {
	m := &metrics{
		signups:        prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_signups_total", Help: "Accounts created."}),
		signupsLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "tasks_signups_limited_total", Help: "Sign-ups refused (429) before hashing: too many from the address, or on the service."}),
		logins:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tasks_logins_total", Help: "Login attempts by result: ok, failed (wrong email or password) or limited (429: too many attempts from the address or for the account)."}, []string{"result"}),
	}
	reg.MustRegister(m.signups, m.signupsLimited, m.logins, poolCollector{p})
	return m
}

// poolCollector reads the database pool's figures at scrape time.
type poolCollector struct{ p pool }

var (
	poolConnsDesc    = prometheus.NewDesc("tasks_db_pool_conns", "Database connections by state: idle or in_use.", []string{"state"}, nil)
	poolMaxDesc      = prometheus.NewDesc("tasks_db_pool_max_conns", "Most connections the pool opens (0: no limit).", nil, nil)
	poolAcquireDesc  = prometheus.NewDesc("tasks_db_pool_acquires_total", "Connections handed out.", nil, nil)
	poolDialDesc     = prometheus.NewDesc("tasks_db_pool_dials_total", "Connections opened.", nil, nil)
	poolWaitDesc     = prometheus.NewDesc("tasks_db_pool_waits_total", "Acquires that found no idle connection (waited, or dialed).", nil, nil)
	poolWaitSecsDesc = prometheus.NewDesc("tasks_db_pool_wait_seconds_total", "Time spent in acquires that found no idle connection.", nil, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConnsDesc, poolMaxDesc, poolAcquireDesc, poolDialDesc, poolWaitDesc, poolWaitSecsDesc} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.stats()
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.idle), "idle")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.inUse), "in_use")
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(s.max))
	ch <- prometheus.MustNewConstMetric(poolAcquireDesc, prometheus.CounterValue, float64(s.acquires))
	ch <- prometheus.MustNewConstMetric(poolDialDesc, prometheus.CounterValue, float64(s.dials))
	ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.CounterValue, float64(s.waits))
	ch <- prometheus.MustNewConstMetric(poolWaitSecsDesc, prometheus.CounterValue, s.waitSeconds)
}

// propagator reads W3C traceparent headers, so a caller's trace continues here.
var propagator = propagation.TraceContext{}
