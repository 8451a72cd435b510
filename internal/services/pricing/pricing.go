// Package pricing is report B's first service: GET /price?product=&city=
// computes a price from eight entities, a product and seven small
// reference tables (brand, category, city with its region, logistics
// zone, warehouse, customer group, price rule).
//
// With Source Postgres every entity is a query (eight per request: the
// report's "before"). With Source Replica the seven reference tables are
// served from an in-memory replica kept fresh by logical replication
// (package replica) and only the product is queried (one per request: the
// report's "after", 8x fewer queries). Both count their queries in
// db_queries_total and their requests in pricing_requests_total.
package pricing

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// Config configures the service: a refdata.Config (slot hlab_pricing).
type Config refdata.Config

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	(*refdata.Config)(c).RegisterFlags(fs, "pricing", "where the seven reference tables come from: replica (memory fed by Postgres, default), mongo (memory fed by MongoDB change streams, see --mongo-uri; products stay in Postgres) or postgres (a query each)")
	fs.DurationVar(&c.PositionWait, "position-wait", refdata.DefaultPositionWait,
		"bound on a request's wait for its "+refdata.MinPositionHeader+" header: a client that wrote to Postgres sends the position read after its commit (SELECT pg_current_wal_insert_lsn()) and is answered once the replica has its write, or 504 after this long")
}

// Command returns the command that makes "hlab serve pricing" run c: the
// flags c changes from the defaults, and its secrets (the DSN, the MongoDB
// URI) for the environment.
func (c Config) Command() cliflag.Command { return cliflag.CommandOf(c) }

// Service is a running pricing service.
type Service struct {
	cfg              Config
	*refdata.Backend // Run, Ready, Close
	store            store
	requests         prometheus.Counter
}

// New opens the pool (and, with DB.Init, creates and seeds the schema)
// and binds the replica; Run starts the replica.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Source == refdata.FromMongo && cfg.DB.DSN == "" {
		// The product of a price is always a query.
		return nil, fmt.Errorf("%w: products come from Postgres, so --dsn is required with --source=mongo too", ErrConfig)
	}
	ref := refdata.NewRefTables()
	b, err := refdata.OpenBackend(ctx, "pricing", refdata.Config(cfg), ref, errs)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: Config(b.Config), Backend: b}
	s.requests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pricing_requests_total", Help: "GET /price requests answered, whatever the outcome.",
	})
	s.cfg.Registry.MustRegister(s.requests)
	pool := b.Pool
	if s.cfg.Source == refdata.FromPostgres {
		s.store = pgStore{pool: pool}
		return s, nil
	}
	s.store = replicaStore{pool: pool, ref: ref, rep: b.Rep}
	return s, nil
}

// Handler serves GET /price. A client that has just written to Postgres
// reads its write by sending the position read after its commit in the
// X-Min-Position header (refdata.MinPositionHeader): the answer waits
// until the replica has it.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /price", s.price)
	return s.WithReplicaAge(mux)
}

// parseID reads a required positive 32-bit id from the query string.
func parseID(r *http.Request, name string) (int32, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, fmt.Errorf("%w: %s is required (GET /price?product=ID&city=ID)", ErrBadRequest, name)
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s must be a positive integer id, not %.32q", ErrBadRequest, name, v)
	}
	return int32(n), nil
}

func (s *Service) price(w http.ResponseWriter, r *http.Request) {
	defer s.requests.Inc()
	q, err := s.quote(r)
	if err != nil {
		errs.Fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(q)
}

func (s *Service) quote(r *http.Request) (Quote, error) {
	product, err := parseID(r, "product")
	if err != nil {
		return Quote{}, err
	}
	city, err := parseID(r, "city")
	if err != nil {
		return Quote{}, err
	}
	if err := s.AwaitPosition(r, errs); err != nil {
		return Quote{}, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DB.Timeout)
	defer cancel()
	in, err := s.store.inputs(ctx, product, city)
	if err != nil {
		return Quote{}, err
	}
	return Compute(in), nil
}

// Serve runs the service under the shared server configured by srv (its
// address or listener, admin address and timeouts) until ctx ends.
func Serve(ctx context.Context, srv server.Config, cfg Config) error {
	srv.Name = "pricing"
	return refdata.Serve(ctx, srv, refdata.Config(cfg), func(ctx context.Context, cfg refdata.Config) (refdata.Service, error) {
		return New(ctx, Config(cfg))
	})
}
