// Package app is report A2's app: GET /handle does report A1's CPU work
// (work.Do) and records a user event (eventlog.Event: a random UUID and a
// random 100-char body), then answers "done!" with the event's id in the
// X-Event-Id header. How the event is recorded is the Mode:
//
//   - Sync: an HTTP POST to the event log (hlab serve eventlog), inside the
//     request, with a connect timeout and an overall Timeout; the log's
//     own work is on the request path. The report's "before".
//   - Async: the event is produced to Kafka with franz-go and the app
//     answers once the record is buffered; a consumer (hlab serve
//     eventlog --consume) does the log work later. The report's "after".
//   - KafkaAck: the event is produced to Kafka with franz-go and the app
//     answers once Kafka acknowledged it, within Timeout. Report A2's
//     "async" handler as it really was: it waited for kafka-go's
//     conn.WriteMessages on the leader, so Kafka's round trip is on the
//     request path.
//   - Databus: the event is published through the databus gateway
//     (report D: all Kafka logic in a server, clients only speak gRPC)
//     and the app answers once Kafka stored it.
//
// # Guarantees (async)
//
// An event the app answered 200 for is stored in Kafka as long as the
// process lives and Kafka comes back: accepted records are retried
// without a delivery deadline (franz-go's idempotent producer, so retries
// do not duplicate). Memory stays bounded: at most Config.Buffer accepted
// events wait for Kafka; beyond that a request fails at once with 503
// (ErrBufferFull). When events wait and Kafka has stored nothing for
// Config.KafkaDeadline, Kafka counts as unreachable and requests fail at
// once with 503 (ErrKafkaUnreachable) instead of filling the buffer, until
// Kafka stores again. With Config.Drop the app answers 200 instead and
// counts the event as dropped. An accepted event is lost only if Kafka
// refuses it for good (the topic was deleted) or it is still buffered when
// a shutdown's flush deadline passes: both are counted
// (app_events_lost_total) and logged.
//
// # Guarantees (kafka-ack)
//
// An event the app answered 200 for is stored in Kafka: the answer waits
// for Kafka's acknowledgement of that event (acks from all in-sync
// replicas, as franz-go's idempotent producer asks; with replication 1,
// the leader's, as kafka-go's conn had), so no answered event lives only
// in the app's memory and none is lost when the app dies. When Kafka does
// not acknowledge within Config.Timeout (it is down, or slow) or refuses
// the event, the request fails with 503 (ErrTimeout, KafkaError; with
// Config.Drop, 200 counted as dropped). A 503 does not prove the event
// absent. franz-go's idempotent producer cannot fail a record while a
// produce request for its partition is unanswered (Kafka may have stored
// it), so when Kafka stalls mid-request, the records of requests that
// timed out stay in the client (at most franz-go's MaxBufferedRecords,
// 50000) and are stored, uncounted, once Kafka answers again; a client
// that retries after a 503 may record its event twice, under two ids.
// While Kafka stalls, a request can also fail before its own Timeout
// when the record ahead of it in the partition's batch timed out
// (franz-go fails a partition's buffered records together).
//
// # Metrics
//
// app_events_recorded_total (answered 200 with the event recorded: stored
// in sync, kafka-ack and databus modes, buffered in async),
// app_events_failed_total (answered 503), app_events_dropped_total
// (answered 200 without it), app_events_delivered_total (stored by the
// event log, Kafka or the gateway), app_events_lost_total (async),
// app_events_pending (async: accepted, waiting for Kafka),
// app_event_errors_total{kind} (see Kind; in async mode Kafka's final
// refusals of accepted events as delivery_KIND, in kafka-ack mode its
// refusals of a request's event as rejected_KIND),
// app_kafka_errors_total{op,kind} (the producer's broker errors while it
// retries: connect, write, read), app_kafka_unreachable (async: 0 or 1)
// and app_inflight_requests.
package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/work"
)

// Mode is how the app records an event.
type Mode string

// Modes.
const (
	Sync     Mode = "sync"
	Async    Mode = "async"
	KafkaAck Mode = "kafka-ack"
	Databus  Mode = "databus"
)

// Modes lists every mode.
var Modes = []Mode{Sync, Async, KafkaAck, Databus}

// Defaults of Config's zero fields.
const (
	DefaultMode           = Sync
	DefaultTimeout        = 2 * time.Second
	DefaultConnectTimeout = time.Second
	DefaultBuffer         = 10000
	DefaultKafkaDeadline  = 3 * time.Second
	DefaultMaxInflight    = 1000
	DefaultFlushTimeout   = 10 * time.Second
)

// EventBodyLen is the length of an event's random body (report A2's).
const EventBodyLen = 100

// Answer is the body of a successful GET /handle (report A1's).
const Answer = "done!"

// Config configures the app. The zero value is sync mode without an event
// log, which New refuses: each mode names its destination. Every other
// zero field takes its Default* value.
type Config struct {
	Mode Mode
	// EventLog is the event log's base URL, e.g. http://127.0.0.1:8081
	// (sync: the app POSTs to EventLog + "/events").
	EventLog string
	// Brokers are Kafka's seed brokers (async, kafka-ack).
	Brokers []string
	// Topic receives the events (async, kafka-ack and databus; default
	// "events").
	Topic string
	// Databus is the gateway's gRPC address, host:port (databus).
	Databus string
	// DatabusCredentials reach a gateway that requires TLS, a client
	// certificate or a token (databus; default: plaintext, no token).
	DatabusCredentials databus.Credentials
	// Timeout bounds recording one event in sync, kafka-ack and databus
	// modes (default 2 s): the POST, Kafka's acknowledgement or the
	// publish, connecting included.
	Timeout time.Duration
	// ConnectTimeout bounds connecting to the event log or to a Kafka
	// broker (default 1 s).
	ConnectTimeout time.Duration
	// Buffer is how many accepted events may wait for Kafka at once
	// (async; default 10000, a few MB): the app's memory bound.
	Buffer int
	// KafkaDeadline: when accepted events wait and Kafka has stored none
	// for this long, new requests fail at once (async; default 3 s).
	KafkaDeadline time.Duration
	// Drop answers 200 when the event cannot be recorded, counting it as
	// dropped, instead of failing the request with 503.
	Drop bool
	// MaxInflight bounds the requests served at once; more get 503
	// (default 1000).
	MaxInflight int
	// FlushTimeout bounds the wait for Kafka or the gateway to store what
	// is pending on Close (default 10 s).
	FlushTimeout time.Duration
	// Registry receives the app's metrics (default: none kept).
	Registry prometheus.Registerer
	// Logger receives errors (default slog.Default()).
	Logger *slog.Logger
}

// setDefaults fills the zero fields with their defaults and checks the
// rest.
func (c *Config) setDefaults() error {
	c.Mode = cmp.Or(c.Mode, DefaultMode)
	c.Topic = cmp.Or(c.Topic, eventlog.DefaultTopic)
	defaults.Positive(&c.Timeout, DefaultTimeout)
	defaults.Positive(&c.ConnectTimeout, DefaultConnectTimeout)
	defaults.Positive(&c.KafkaDeadline, DefaultKafkaDeadline)
	defaults.Positive(&c.FlushTimeout, DefaultFlushTimeout)
	defaults.Positive(&c.Buffer, DefaultBuffer)
	defaults.Positive(&c.MaxInflight, DefaultMaxInflight)
	c.Registry = cmp.Or[prometheus.Registerer](c.Registry, prometheus.NewRegistry())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	switch c.Mode {
	case Sync:
		u, err := url.Parse(c.EventLog)
		if c.EventLog == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("app: sync mode needs the event log's URL (--eventlog http://host:port), got %q", c.EventLog)
		}
	case Async, KafkaAck:
		if len(c.Brokers) == 0 {
			return fmt.Errorf("app: %s mode needs Kafka's brokers (--brokers host:port)", c.Mode)
		}
	case Databus:
		if _, _, err := net.SplitHostPort(c.Databus); err != nil {
			return fmt.Errorf("app: databus mode needs the gateway's gRPC address (--databus host:port), got %q", c.Databus)
		}
	default:
		return fmt.Errorf("app: unknown mode %q: use %s", c.Mode, modeList())
	}
	return nil
}

// modeList is "sync, async, kafka-ack or databus".
func modeList() string {
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// recorder records events one way.
type recorder interface {
	// record records ev (payload is its JSON) or says why not.
	record(ctx context.Context, ev eventlog.Event, payload []byte) error
	ready() error
	// close stores what is pending within ctx, then releases everything.
	close(ctx context.Context) error
}

// App is the app. Its handler is safe for concurrent use.
type App struct {
	cfg      Config
	rec      recorder
	m        *metrics
	inflight chan struct{}
}

type metrics struct {
	recorded, failed, dropped, delivered, lost prometheus.Counter
	errors                                     *prometheus.CounterVec
	kafkaErrors                                *prometheus.CounterVec
	pending, unreachable, inflight             prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, mode Mode) *metrics {
	labels := prometheus.Labels{"mode": string(mode)}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		recorded:  counter("app_events_recorded_total", "Requests answered 200 with their event recorded (sync, kafka-ack, databus: stored; async: buffered for Kafka)."),
		failed:    counter("app_events_failed_total", "Requests answered 503 because their event could not be recorded."),
		dropped:   counter("app_events_dropped_total", "Requests answered 200 without their event (--drop), the event counted here."),
		delivered: counter("app_events_delivered_total", "Events stored by their destination (the event log, Kafka, the gateway)."),
		lost:      counter("app_events_lost_total", "Events answered 200 that never reached Kafka (refused for good, or still buffered when a shutdown's flush deadline passed)."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "app_event_errors_total", Help: "Events not recorded or not delivered, by kind.", ConstLabels: labels,
		}, []string{"kind"}),
		kafkaErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "app_kafka_errors_total", Help: "Broker errors the producer met while retrying, by operation (connect, write, read) and kind.", ConstLabels: labels,
		}, []string{"op", "kind"}),
		pending:     gauge("app_events_pending", "Events accepted and waiting for Kafka to store them (async)."),
		unreachable: gauge("app_kafka_unreachable", "1 while Kafka counts as unreachable: events wait and none was stored for the deadline (async)."),
		inflight:    gauge("app_inflight_requests", "Requests being served."),
	}
	reg.MustRegister(m.recorded, m.failed, m.dropped, m.delivered, m.lost, m.errors, m.kafkaErrors, m.pending, m.unreachable, m.inflight)
	return m
}

// New makes the app. In async, kafka-ack and databus modes it connects in
// the background; Ready says when it can record.
func New(cfg Config) (*App, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, m: newMetrics(cfg.Registry, cfg.Mode), inflight: make(chan struct{}, cfg.MaxInflight)}
	var err error
	switch cfg.Mode {
	case Sync:
		a.rec = newSyncRecorder(cfg)
	case Async:
		a.rec, err = newKafkaRecorder(cfg, a.m)
	case KafkaAck:
		a.rec, err = newKafkaAckRecorder(cfg, a.m)
	case Databus:
		a.rec, err = newDatabusRecorder(cfg)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Ready reports whether the app can record events (async, kafka-ack:
// Kafka answered and the topic exists; databus: the publish stream is
// open).
func (a *App) Ready() error { return a.rec.ready() }

// Close stores what is pending (within Config.FlushTimeout) and releases
// connections. Events still pending after it are counted as lost.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.FlushTimeout)
	defer cancel()
	return a.rec.close(ctx)
}

// Handler serves GET /handle.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /handle", a.handle)
	return mux
}

func (a *App) handle(w http.ResponseWriter, r *http.Request) {
	select {
	case a.inflight <- struct{}{}:
		defer func() { <-a.inflight }()
	default:
		a.refuse(w, ErrTooManyInflight)
		return
	}
	a.m.inflight.Inc()
	defer a.m.inflight.Dec()

	work.Do()
	ev := eventlog.Event{ID: uuid.NewString(), Time: time.Now().UTC(), Body: work.RandomString(EventBodyLen)}
	payload, err := json.Marshal(ev)
	if err != nil {
		panic(err) // strings and a time always marshal
	}
	if err := a.rec.record(r.Context(), ev, payload); err != nil {
		if r.Context().Err() != nil && Kind(err) != "client_gone" {
			err = fmt.Errorf("%w: %w", ErrClientGone, err)
		}
		a.refuse(w, err)
		return
	}
	a.m.recorded.Inc()
	if a.cfg.Mode != Async { // async counts deliveries when Kafka acks; the others stored it already
		a.m.delivered.Inc()
	}
	w.Header().Set(eventlog.IDHeader, ev.ID)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, Answer)
}

// refuse answers a request whose event was not recorded: 503, or 200
// with the event dropped under Config.Drop. It is the one place that maps
// errors to statuses.
func (a *App) refuse(w http.ResponseWriter, err error) {
	kind := Kind(err)
	a.m.errors.WithLabelValues(kind).Inc()
	if a.cfg.Drop && kind != "too_many_inflight" {
		a.m.dropped.Inc()
		w.Header().Set("X-Event-Dropped", kind)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, Answer)
		return
	}
	a.m.failed.Inc()
	w.Header().Set("X-Failure", kind)
	w.Header().Set("Retry-After", "1")
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// Serve runs the app under the shared server configured by srv (its
// address or listener, admin address and timeouts; Serve sets its name,
// registry, logger and readiness) until ctx ends, then stops taking
// requests, lets those in flight finish, and stores what is pending
// (Close).
func Serve(ctx context.Context, srv server.Config, cfg Config) error {
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	cfg.Logger = cmp.Or(cfg.Logger, srv.Logger, slog.Default())
	a, err := New(cfg)
	if err != nil {
		return err
	}
	srv.Name, srv.Registry, srv.Logger, srv.Ready = "app", reg, cfg.Logger, a.Ready
	srvErr := server.Run(ctx, srv, a.Handler())
	closeErr := a.Close()
	if srvErr != nil {
		return srvErr
	}
	return closeErr
}
