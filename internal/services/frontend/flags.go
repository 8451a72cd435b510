package frontend

import (
	"flag"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// RegisterFlags registers the front's flags on fs ("hlab serve
// frontend"), with the package's defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Policy = DefaultPolicy
	fs.StringVar(&c.Backend, "backend", "", "the back's URL, e.g. http://127.0.0.1:9000/ (required)")
	fs.Var(cliflag.Text(&c.Policy), "policy", "what guards the call: none (no timeout at all), timeout, breaker, hedge or adaptive (each but none includes the timeouts)")
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "overall deadline of a call to the back, hedges included")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", DefaultConnectTimeout, "bound on connecting to the back")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", DefaultHeaderTimeout, "bound on the wait for the back's response headers")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", DefaultBodyTimeout, "bound on reading the back's body, from its headers")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest answer accepted from the back")
	fs.IntVar(&c.MaxInflight, "max-inflight", DefaultMaxInflight, "requests served at once; more get 503")
	fs.BoolVar(&c.DisableKeepAlives, "disable-keepalives", false, "open a new connection to the back for every call and close it after (Node's default agent in report E's time)")
	fs.Float64Var(&c.BreakerFailureRate, "breaker-failure-rate", DefaultBreakerFailureRate, "breaker: failure rate that opens the circuit")
	fs.UintVar(&c.BreakerMinRequests, "breaker-min-requests", DefaultBreakerMinRequests, "breaker: calls in the window before the rate counts")
	fs.DurationVar(&c.BreakerWindow, "breaker-window", DefaultBreakerWindow, "breaker: window of the failure rate")
	fs.DurationVar(&c.BreakerDelay, "breaker-delay", DefaultBreakerDelay, "breaker: time open before a trial call")
	fs.DurationVar(&c.HedgeDelay, "hedge-delay", DefaultHedgeDelay, "hedge: wait this long for an answer before sending another attempt (about the healthy back's tail latency)")
	fs.IntVar(&c.MaxHedges, "max-hedges", DefaultMaxHedges, "hedge: extra attempts per request at most")
	fs.Float64Var(&c.HedgeBudget, "hedge-budget", DefaultHedgeBudget, "hedge: largest share of calls in flight that may be hedges (the budget)")
	fs.UintVar(&c.LimitMin, "limit-min", DefaultLimitMin, "adaptive: lowest concurrency limit")
	fs.UintVar(&c.LimitMax, "limit-max", DefaultLimitMax, "adaptive: highest concurrency limit")
	fs.UintVar(&c.LimitInitial, "limit-initial", DefaultLimitInitial, "adaptive: starting concurrency limit")
}

// Args returns the command line that makes "hlab serve frontend" run c (the
// fields c changes from the defaults).
func (c Config) Args() []string { return cliflag.Args(c) }
