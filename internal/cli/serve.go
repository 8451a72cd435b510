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

	"github.com/highload-lab/hlab/internal/lb"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/work"
)

// service is one "hlab serve NAME": its flags and how to build its handler.
type service struct {
	summary string
	// setup registers the service's flags on fs and returns a function that
	// builds its handler once flags are parsed.
	setup func(fs *flag.FlagSet) func(reg *prometheus.Registry) (http.Handler, error)
}

var services = map[string]service{
	"work": {
		summary: "report A1's CPU-bound service: GET /handle does 1001 json.Marshal calls and answers done!",
		setup: func(fs *flag.FlagSet) func(*prometheus.Registry) (http.Handler, error) {
			return func(reg *prometheus.Registry) (http.Handler, error) { return work.Handler(reg), nil }
		},
	},
	"lb": {
		summary: "the built-in round-robin load balancer (the embedded default when nginx is absent)",
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

Every service answers GET /healthz and Prometheus GET /metrics, and shuts
down gracefully on SIGTERM or Ctrl-C.`)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	build := svc.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return fail(st, "serve", 2, fmt.Errorf("unexpected argument %q (flags only; see hlab serve %s --help)", fs.Arg(0), name))
	}
	reg := prometheus.NewRegistry()
	h, err := build(reg)
	if err != nil {
		return fail(st, "serve "+name, 2, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(st.Stderr, nil))
	if err := server.Run(ctx, server.Config{Name: name, Addr: *addr, Registry: reg, Logger: logger}, h); err != nil {
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
