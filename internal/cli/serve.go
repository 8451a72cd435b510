package cli

import (
	"context"
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
	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/activities"
	"github.com/highload-lab/hlab/internal/services/app"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/catalog"
	"github.com/highload-lab/hlab/internal/services/eventlog"
	"github.com/highload-lab/hlab/internal/services/frontend"
	"github.com/highload-lab/hlab/internal/services/hello"
	"github.com/highload-lab/hlab/internal/services/pricing"
	"github.com/highload-lab/hlab/internal/services/tasks"
	"github.com/highload-lab/hlab/internal/services/work"
)

// service is one "hlab serve NAME": its flags and how to build its handler.
type service struct {
	summary string
	// setup registers the service's flags on fs and returns a function that
	// builds its handler once flags are parsed.
	setup func(fs *flag.FlagSet) func(reg *prometheus.Registry) (http.Handler, error)
	// longHandlers marks a setup service whose handlers run long by
	// design (fault injection, an unguarded call, a proxy): its
	// --write-timeout defaults to none.
	longHandlers bool
	// run, set instead of setup, runs the service itself (a service with
	// a lifecycle of its own, or more than one listener: the databus
	// gateway's gRPC beside its HTTP endpoints). It registers its flags on
	// fs, those of its HTTP server included (serverFlags, or its Process's
	// RegisterFlags: "addr" is the HTTP address), and returns the runner.
	run func(fs *flag.FlagSet) func(ctx context.Context, logger *slog.Logger) error
}

// serverFlags registers a service's HTTP server flags on fs: --addr, and
// those every service shares (--admin-addr, --read-timeout,
// --write-timeout; server.Config.RegisterFlags). With longHandlers, the
// write timeout defaults to none.
func serverFlags(fs *flag.FlagSet, addrHelp string, longHandlers bool) *server.Config {
	var c server.Config
	if longHandlers {
		c.WriteTimeout = -1
	}
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", addrHelp)
	c.RegisterFlags(fs)
	return &c
}

var services = map[string]service{
	"activities": {
		summary: "report A3's activity service: GET /handle, POST /activities, GET /activities?user_id= on Postgres or Cassandra (--store), optionally --batch",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "address to listen on", false)
			var c activities.Config
			c.RegisterFlags(fs)
			return func(ctx context.Context, logger *slog.Logger) error {
				c.Logger, srv.Logger = logger, logger
				return activities.Serve(ctx, *srv, c)
			}
		},
	},
	"tasks": {
		summary: "report C's task API: auth, task CRUD, WebSocket updates, push notifications, on Postgres (--dsn)",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			var p tasks.Process
			p.RegisterFlags(fs, "addr")
			return p.Run
		},
	},
	"hello": {
		summary: "a Go hello world: GET / answers Hello, World! (the lab's ceiling for a quota)",
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			return func(*prometheus.Registry) (http.Handler, error) { return hello.Handler(), nil }
		},
	},
	"pricing": {
		summary: "report B's pricing: GET /price?product=&city= from 8 entities, 7 from an in-memory replica (--source replica) or all from Postgres",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "address to listen on", false)
			var c pricing.Config
			pricing.RegisterFlags(fs, &c)
			return func(ctx context.Context, logger *slog.Logger) error {
				c.Logger, srv.Logger = logger, logger
				return pricing.Serve(ctx, *srv, c)
			}
		},
	},
	"catalog": {
		summary: "report B's customer catalog: GET /customers/{id}, GET /customers?region=&limit=, from an in-memory replica or Postgres",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "address to listen on", false)
			var c catalog.Config
			catalog.RegisterFlags(fs, &c)
			return func(ctx context.Context, logger *slog.Logger) error {
				c.Logger, srv.Logger = logger, logger
				return catalog.Serve(ctx, *srv, c)
			}
		},
	},
	"databus": {
		summary: "report D's gateway: gRPC streams in front of Kafka (--brokers), or --echo without Kafka",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			var p gateway.Process
			p.RegisterFlags(fs, "addr")
			return p.Run
		},
	},
	"eventlog": {
		summary: "report A2's event log: POST /events does the log work; --consume also consumes events from Kafka (at least once, lag in /metrics)",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "address to listen on", false)
			var c eventlog.Config
			c.RegisterFlags(fs)
			return func(ctx context.Context, logger *slog.Logger) error {
				c.Logger, srv.Logger = logger, logger
				return eventlog.Serve(ctx, *srv, c)
			}
		},
	},
	"app": {
		summary: "report A2's app: GET /handle does A1's work and records an event by --mode sync (HTTP), async (Kafka, buffered), kafka-ack (Kafka, acknowledged) or databus (the gateway)",
		run: func(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
			srv := serverFlags(fs, "address to listen on", false)
			var c app.Config
			c.RegisterFlags(fs)
			return func(ctx context.Context, logger *slog.Logger) error {
				c.Logger, srv.Logger = logger, logger
				return app.Serve(ctx, *srv, c)
			}
		},
	},
	"work": {
		summary: "report A1's CPU-bound service: GET /handle does 1001 json.Marshal calls and answers done!",
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			return func(reg *prometheus.Registry) (http.Handler, error) { return work.Handler(reg), nil }
		},
	},
	"lb": {
		summary:      "the built-in round-robin load balancer (the embedded default when nginx is absent)",
		longHandlers: true,
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			upstreams := fs.String("upstreams", "", "comma-separated host:port list to balance over (required)")
			return func(*prometheus.Registry) (http.Handler, error) {
				var ups []string
				for _, u := range strings.Split(*upstreams, ",") {
					if u = strings.TrimSpace(u); u != "" {
						ups = append(ups, u)
					}
				}
				return lb.New(lb.Config{Upstreams: ups})
			}
		},
	},
	"backend": {
		summary:      "report E's dependency: GET / answers after a delay; faults: slow requests, trickle, black hole",
		longHandlers: true,
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			var c backend.Config
			c.RegisterFlags(fs)
			return func(reg *prometheus.Registry) (http.Handler, error) { return backend.New(c, reg) }
		},
	},
	"frontend": {
		summary:      "report E's front: GET / calls --backend under a --policy (none, timeout, breaker, hedge, adaptive)",
		longHandlers: true,
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			var c frontend.Config
			c.RegisterFlags(fs)
			return func(reg *prometheus.Registry) (http.Handler, error) { return frontend.New(c, reg) }
		},
	},
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
	var (
		srv   *server.Config
		build func(reg *prometheus.Registry) (http.Handler, error)
		run   func(ctx context.Context, logger *slog.Logger) error
	)
	if svc.run != nil {
		run = svc.run(fs)
	} else {
		srv = serverFlags(fs, "address to listen on", svc.longHandlers)
		build = svc.setup(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return fail(st, "serve", 2, fmt.Errorf("unexpected argument %q (flags only; see hlab serve %s --help)", fs.Arg(0), name))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(st.Stderr, nil))
	if run != nil {
		if err := run(ctx, logger); err != nil {
			return fail(st, "serve "+name, 1, err)
		}
		return 0
	}
	reg := prometheus.NewRegistry()
	h, err := build(reg)
	if err != nil {
		return fail(st, "serve "+name, 2, err)
	}
	srv.Name, srv.Registry, srv.Logger = name, reg, logger
	if err := server.Run(ctx, *srv, h); err != nil {
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
