package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/grpcfloor"
	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/internal/services/app"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/frontend"
	"github.com/highload-lab/hlab/internal/services/hello"
	"github.com/highload-lab/hlab/internal/services/kafkafake"
	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/services/work"
)

// service is one "hlab serve NAME". Every service follows one
// convention: its Config binds its own flags (Config.RegisterFlags) and
// gives them back (Config.Args, or Config.Command when it holds secrets,
// which go to the environment: the lab uses them), and the package's
// Serve(ctx, server.Config, Config) runs it under the shared server, or,
// for a service that is only a handler, New builds that handler.
type service struct {
	summary string
	// run registers the service's flags on fs, the shared server's
	// included, and returns the runner to call once they are parsed.
	run func(fs *flag.FlagSet) func(ctx context.Context, srv server.Config) error
}

// configFlags is a service Config that binds its flags to its fields.
type configFlags[C any] interface {
	*C
	RegisterFlags(fs *flag.FlagSet)
}

// serving is a service run by its package's Serve. addr is the default
// of --addr.
func serving[C any, P configFlags[C]](summary, addr string, serve func(context.Context, server.Config, C) error) service {
	return service{summary: summary, run: func(fs *flag.FlagSet) func(context.Context, server.Config) error {
		srv := serverFlags(fs, addr, false)
		var c C
		P(&c).RegisterFlags(fs)
		return func(ctx context.Context, base server.Config) error {
			srv.Name, srv.Logger = base.Name, base.Logger
			return serve(ctx, *srv, c)
		}
	}}
}

// handling is a service that is only a handler, built from its Config.
// longHandlers marks one whose handlers run long by design (fault
// injection, an unguarded call, a proxy): its --write-timeout defaults to
// none.
func handling[C any, P configFlags[C]](summary string, longHandlers bool, build func(C, *prometheus.Registry) (http.Handler, error)) service {
	return service{summary: summary, run: func(fs *flag.FlagSet) func(context.Context, server.Config) error {
		srv := serverFlags(fs, defaultAddr, longHandlers)
		var c C
		P(&c).RegisterFlags(fs)
		return func(ctx context.Context, base server.Config) error {
			reg := prometheus.NewRegistry()
			h, err := build(c, reg)
			if err != nil {
				return usageError{err}
			}
			srv.Name, srv.Registry, srv.Logger = base.Name, reg, base.Logger
			return server.Run(ctx, *srv, h)
		}
	}}
}

// noFlags is the Config of a handler with nothing to configure.
type noFlags struct{}

func (*noFlags) RegisterFlags(*flag.FlagSet) {}

// defaultAddr is --addr's default for every service but the gateway's.
const defaultAddr = "127.0.0.1:8080"

// serverFlags registers a service's HTTP server flags on fs: --addr, with
// addr as its default, and those every service shares (--admin-addr,
// --read-timeout, --write-timeout; server.Config.RegisterFlags). With
// longHandlers, the write timeout defaults to none.
func serverFlags(fs *flag.FlagSet, addr string, longHandlers bool) *server.Config {
	var c server.Config
	if longHandlers {
		c.WriteTimeout = -1
	}
	fs.StringVar(&c.Addr, "addr", addr, "address to listen on (the service, /healthz and /metrics)")
	c.RegisterFlags(fs)
	return &c
}

// usageError marks a Config a service refused before it started: exit
// code 2, as for a bad flag.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

var services = map[string]service{
	"activities": serving("report A3's activity service: GET /handle, POST /activities, GET /activities?user_id= on Postgres or Cassandra (--store), optionally --batch",
		defaultAddr, activities.Serve),
	"tasks": serving("report C's task API: auth, task CRUD, WebSocket updates, push notifications, on Postgres (--dsn)",
		defaultAddr, tasks.Serve),
	"pricing": serving("report B's pricing: GET /price?product=&city= from 8 entities, 7 from an in-memory replica (--source replica) or all from Postgres",
		defaultAddr, pricing.Serve),
	"catalog": serving("report B's customer catalog: GET /customers/{id}, GET /customers?region=&limit=, from an in-memory replica or Postgres",
		defaultAddr, catalog.Serve),
	"databus": serving("report D's gateway: gRPC streams in front of Kafka (--brokers), or --echo without Kafka; --addr is its HTTP address (/healthz, /metrics)",
		gateway.DefaultHTTPAddr, gateway.Serve),
	"grpcfloor": serving("the floor of the gateway's echo and idle-stream figures: the databus API's Publish as a bare grpc-go Recv/Send loop with the gateway's transport settings, nothing else; run it in the gateway's place to see what grpc-go and the kernel cost on this machine; --addr is its HTTP address (/healthz, /metrics)",
		gateway.DefaultHTTPAddr, grpcfloor.Serve),
	"eventlog": serving("report A2's event log: POST /events does the log work; --consume also consumes events from Kafka (at least once, lag in /metrics)",
		defaultAddr, eventlog.Serve),
	"app": serving("report A2's app: GET /handle does A1's work and records an event by --mode sync (HTTP), async (Kafka, buffered), kafka-ack (Kafka, acknowledged) or databus (the gateway)",
		defaultAddr, app.Serve),
	"kfake": serving("franz-go's kfake, an in-memory fake Kafka (embedded default): --kafka-addr, --topics; --addr is its HTTP address (/healthz, /metrics)",
		defaultAddr, kafkafake.Serve),
	"hello": handling("a Go hello world: GET / answers Hello, World!, or with --body-bytes a JSON body of that size (the lab's ceiling for a quota)", false,
		func(c hello.Config, _ *prometheus.Registry) (http.Handler, error) { return hello.New(c) }),
	"work": handling("report A1's CPU-bound service: GET /handle does the report's 1001 json.Marshal calls of a random string and answers done!", false,
		func(_ noFlags, reg *prometheus.Registry) (http.Handler, error) { return work.Handler(reg), nil }),
	"lb": handling("the built-in round-robin load balancer (the embedded default when nginx is absent): nginx's defaults, passive health checks, GET/HEAD retried on the next upstream", true,
		func(c lb.Config, reg *prometheus.Registry) (http.Handler, error) { return lb.New(c, reg) }),
	"lb-tcp": serving("the built-in connection balancer, as a Kubernetes Service: each client connection (a gRPC client's, say) goes round robin to one of --upstreams for its life; --listen is where clients connect, --addr its HTTP address (/healthz, /metrics)",
		defaultAddr, lb.ServeTCP),
	"backend": handling("report E's dependency: GET / answers after a delay; faults: slow requests, trickle, black hole", true,
		func(c backend.Config, reg *prometheus.Registry) (http.Handler, error) { return backend.New(c, reg) }),
	"frontend": handling("report E's front: GET / calls --backend under a --policy (none, timeout, breaker, hedge, adaptive)", true,
		func(c frontend.Config, reg *prometheus.Registry) (http.Handler, error) { return frontend.New(c, reg) }),
}

func runServe(args []string, st *State) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		serveUsage(st)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	name := args[0]
	svc, ok := services[name]
	if !ok {
		fmt.Fprintf(st.Stderr, "hlab serve: no service %q\n", name)
		serveUsage(st)
		return 2
	}
	fs := newFlagSet(st, "serve "+name, "hlab serve "+name+" [flags]", svc.summary+`

Every service answers GET /healthz and Prometheus GET /metrics on --addr,
serves Go's profiles (/debug/pprof/) only on --admin-addr (off by
default; never on --addr), bounds reading a request with --read-timeout
and answering it with --write-timeout, and shuts down gracefully on
SIGTERM or Ctrl-C.`)
	run := svc.run(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return fail(st, "serve", 2, fmt.Errorf("unexpected argument %q (flags only; see hlab serve %s --help)", fs.Arg(0), name))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(st.Stderr, nil))
	if err := run(ctx, server.Config{Name: name, Logger: logger}); err != nil {
		if errors.As(err, new(usageError)) {
			return fail(st, "serve "+name, 2, err)
		}
		return fail(st, "serve "+name, 1, err)
	}
	return 0
}

func serveUsage(st *State) {
	fmt.Fprint(st.Stderr, "Usage: hlab serve NAME [flags]\n\nServices:\n")
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(st.Stderr, "  %-8s %s\n", n, services[n].summary)
	}
	fmt.Fprint(st.Stderr, "\nRun \"hlab serve NAME --help\" for a service's flags.\n")
}
