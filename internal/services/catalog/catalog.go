// Package catalog is report B's second service: a wholesale-customer
// catalog over HTTP, served entirely from an in-memory replica of the
// customers table (package replica), or from Postgres for comparison.
// The replica follows Postgres (logical replication, --source=replica)
// or, as in the report, a MongoDB customers collection through change
// streams (--source=mongo --mongo-uri=...; then no Postgres is needed).
//
//	GET /customers/{id}                  one customer (JSON)
//	GET /customers?region=R&limit=N      up to N (1-100, default 20) customers of region R, by name
//
// The listing needs order, which a map does not keep (the report's
// caveat): the replica keeps an ordered index by (region, name, id), and
// Postgres an index on the same columns.
package catalog

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/services/refdata"
)

// Limits of a listing.
const (
	DefaultLimit   = 20
	MaxLimit       = 100
	MaxRegionBytes = 64
)

// Config configures the service: a refdata.Config (slot hlab_catalog).
// With Source FromMongo only Mongo.URI is required.
type Config refdata.Config

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	(*refdata.Config)(c).RegisterFlags(fs, "catalog", "where customers come from: replica (memory fed by Postgres, default), mongo (memory fed by MongoDB change streams; see --mongo-uri) or postgres (a query per request)")
}

// Command returns the command that makes "hlab serve catalog" run c: the
// flags c changes from the defaults, and its secrets (the DSN, the MongoDB
// URI) for the environment.
func (c Config) Command() cliflag.Command { return cliflag.CommandOf(c) }

// Service is a running catalog service.
type Service struct {
	cfg              Config
	*refdata.Backend // Run, Ready, Close
	store            store
}

// New opens the pool (and, with DB.Init, creates and seeds the schema)
// and binds the replica; Run starts the replica.
func New(ctx context.Context, cfg Config) (*Service, error) {
	c := refdata.NewCustomers()
	b, err := refdata.OpenBackend(ctx, "catalog", refdata.Config(cfg), c, errs)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: Config(b.Config), Backend: b}
	pool := b.Pool
	if s.cfg.Source == refdata.FromPostgres {
		s.store = pgStore{pool: pool, timeout: s.cfg.DB.Timeout}
		return s, nil
	}
	s.store = replicaStore{c: c, rep: b.Rep}
	return s, nil
}

// getPattern is the route of one customer, and the path label of its
// request metrics.
const getPattern = "GET /customers/{id}"

// Handler serves the catalog's routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(getPattern, func(w http.ResponseWriter, r *http.Request) { s.get(w, r, r.PathValue("id")) })
	mux.HandleFunc("GET /customers", s.list)
	return s.WithReplicaAge(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A plain GET /customers/{id} skips the mux's matching (its
		// wildcard match cost as much as the lookup and the encoding
		// together); anything else, the mux decides as before.
		if id, ok := customerID(r); ok {
			r.Pattern = getPattern
			s.get(w, r, id)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// customerID is the {id} of a GET /customers/{id} whose path the mux
// would match as is: a single segment, not "." or "..", which the mux
// cleans first.
func customerID(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet {
		return "", false
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/customers/")
	if !ok || id == "" || id == "." || id == ".." || strings.IndexByte(id, '/') >= 0 {
		return "", false
	}
	return id, true
}

func fail(w http.ResponseWriter, err error) { errs.Fail(w, err) }

func (s *Service) get(w http.ResponseWriter, r *http.Request, v string) {
	id, err := strconv.ParseInt(v, 10, 32)
	if err != nil || id < 1 || id > math.MaxInt32 {
		fail(w, fmt.Errorf("%w: customer id must be a positive integer, not %.32q", ErrBadRequest, v))
		return
	}
	c, err := s.store.get(r.Context(), int32(id))
	if err != nil {
		fail(w, err)
		return
	}
	writeCustomer(w, c)
}

// Listing is the answer of GET /customers.
type Listing struct {
	Region    string             `json:"region"`
	Customers []refdata.Customer `json:"customers"`
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	region := q.Get("region")
	if region == "" || len(region) > MaxRegionBytes {
		fail(w, fmt.Errorf("%w: region is required, at most %d bytes (GET /customers?region=NAME&limit=N)", ErrBadRequest, MaxRegionBytes))
		return
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			fail(w, fmt.Errorf("%w: limit must be 1-%d, not %.32q", ErrBadRequest, MaxLimit, v))
			return
		}
		limit = n
	}
	out, err := s.store.list(r.Context(), region, limit, make([]refdata.Customer, 0, limit))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, Listing{Region: region, Customers: out})
}

// Serve runs the service under the shared server configured by srv (its
// address or listener, admin address and timeouts) until ctx ends.
func Serve(ctx context.Context, srv server.Config, cfg Config) error {
	srv.Name = "catalog"
	return refdata.Serve(ctx, srv, refdata.Config(cfg), func(ctx context.Context, cfg refdata.Config) (refdata.Service, error) {
		return New(ctx, Config(cfg))
	})
}
