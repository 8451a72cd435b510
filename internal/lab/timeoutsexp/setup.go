package timeoutsexp

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/services/backend"
	"github.com/highload-lab/hlab/internal/services/frontend"
)

// Setup items the first claim's rows are held to (Run.UsedInFirstClaim):
// each is passed where the claim's services and load are started.
const (
	itemBack         = "back: its answers"
	itemFrontNone    = "front, the no-timeout row: its call to the back"
	itemFrontTimeout = "front, the timeout row: its call to the back"
	itemInflight     = "front: requests served at once"
	itemConns        = "front: connections to the back (unirest over Node's default http agent, which keeps none alive)"
	itemFrontQuota   = "front: CPU and memory"
	itemBackQuota    = "back: CPU and memory"
	itemClosedLoad   = "load, closed model (the first claim)"
	itemClientWait   = "load: how long a client waits for an answer"
	itemRounds       = "runs of the first claim's rows"
)

// setupItems sets the experiment's setup beside report E's, item by item.
func setupItems(o lab.Options) []labresult.Setup {
	steps := plan(o)
	return []labresult.Setup{{
		Item:       "front and back: what runs them",
		Report:     "server1.js and server2.js on Node.js 7.1 (docker image mhart/alpine-node:7.1); the front calls the back with unirest",
		Ours:       "hlab serve frontend and hlab serve backend, Go; the front calls the back with net/http under failsafe-go's policies",
		Why:        "the lab's services are Go reimplementations; the report's two scripts are not in its text beyond .timeout(3000). The claims compare the front with and without a timeout on the same runtime, as the report did; its Node heap figures stand beside our Go heap",
		FirstClaim: true,
	}, {
		Item:       itemBack,
		Report:     "answers in 100 ms; 1 request in 10 takes 10 s",
		Ours:       backText(claimBack()),
		FirstClaim: true,
	}, {
		Item:       itemFrontNone,
		Report:     "no timeout",
		Ours:       frontText(claimFront(frontend.None, "")),
		FirstClaim: true,
	}, {
		Item:   itemFrontTimeout,
		Report: ".timeout(3000)",
		Ours:   frontText(claimFront(frontend.Timeout, "")),
		Why: "unirest hands .timeout(3000) to the request library, whose timeout bounds the connect and the wait for the answer's headers at 3 s each; " +
			"the slow back sends nothing for 10 s, so both cut its calls at 3 s. Ours bounds the whole call at 3 s too, and the body, the timeouts the report's closing section asks for",
		FirstClaim: true,
	}, {
		Item:       itemInflight,
		Report:     "no bound",
		Ours:       inflightText(claimFront(frontend.None, "")),
		Why:        "every front of ours bounds what it holds, so that even no timeout cannot grow forever; the first claim's rows hold at most about 1,100 requests at once, far below it",
		FirstClaim: true,
	}, {
		Item:       itemFrontQuota,
		Report:     "no limit (one Node process: its JavaScript runs on one thread)",
		Ours:       quotaText(frontCPU, frontMemMB),
		Why:        "one core is what one Node process computes on; the memory ceiling is a guard far above what any row uses (a few hundred MB)",
		FirstClaim: true,
	}, {
		Item:       itemBackQuota,
		Report:     "no limit",
		Ours:       quotaText(0, 0),
		FirstClaim: true,
	}, {
		Item:       itemConns,
		Report:     "a new connection per call",
		Ours:       connText(claimFront(frontend.None, "")),
		FirstClaim: true,
	}, {
		Item:       "machine",
		Report:     "one laptop (Dell XPS), docker --net host: siege and vegeta beside the servers",
		Ours:       "one 2-core machine, 127.0.0.1: hlab load beside the services, outside the front's quota",
		Why:        "the lab runs where it is started, on one machine as the report did; the quota keeps the load generator off the front's core",
		FirstClaim: true,
	}, {
		Item:       itemClosedLoad,
		Report:     "siege -c 1000 127.0.0.1:3000, about 3 min, stopped by hand (ctrl+c)",
		Ours:       closedLoadText(claimSteps(steps, true)),
		Why:        closedWhy(o),
		FirstClaim: true,
	}, {
		Item:       itemClientWait,
		Report:     "as long as the answer takes (siege's and vegeta's settings are not shown; every 10 s answer was counted)",
		Ours:       durText(loadTimeout),
		Why:        "a bound every client of ours has, above the slowest answer (10 s), so every answer still counts",
		FirstClaim: true,
	}, {
		Item:       itemRounds,
		Report:     "one run of each",
		Ours:       roundsText(claimMinRounds, claimMaxRounds),
		Why:        "one run gives no interval; runs of both rows in turn give the ratio's 95% interval, and load from elsewhere weighs on both alike",
		FirstClaim: true,
	}, {
		Item:   "load, open model (the second and third claims)",
		Report: "vegeta attack --duration 3m -rate 1000 (180000 requests); latency from each request's send",
		Ours:   openLoadText(claimSteps(steps, false)),
		Why:    openWhy(o),
	}, {
		Item:   "memory: what is sampled",
		Report: "process.memoryUsage().heapUsed every 100 ms, printed with console.log and summed up by number-aggregator-stats over the whole run",
		Ours:   "the Go heap in use (go_memstats_heap_alloc_bytes) and the RSS every 100 ms, read from the front's /metrics and /proc by the lab, once requests in flight have settled",
		Why:    "Go's heap in use is what Node's heapUsed counts; the report itself warns that logging from the process costs, so the lab reads it from outside; sampling before in flight settles would mix the ramp-up into the average",
	}, {
		Item:   "the balancer in front of a slow node (fault rows)",
		Report: "a load balancer, not named, whose health check still gets 200 OK from the slow node",
		Ours:   fmt.Sprintf("the lab's balancer (nginx when installed, else the built-in one) with its defaults (a connection per request), round robin over %d backs, one of them turned slow (every answer in %s); its /healthz answers 200", dominoNodes, durText(faultTimingOf(o).slowNode)),
		Why:    "the report describes the domino effect and measures nothing of it; these are our rows of it",
	}}
}

// claimBack is the back of the claims' rows.
func claimBack() backend.Config {
	return backend.Config{Delay: fastDelay, SlowDelay: slowDelay, SlowFraction: slowFraction}
}

// claimFront is the front of the claims' rows with policy p, calling
// back: every timeout set, so that what the command line passes is what
// the setup names, and a connection per call, as the report's front made
// them. Every row's front is this one with its policy.
func claimFront(p frontend.Policy, back string) frontend.Config {
	return frontend.Config{Backend: back, Policy: p, Timeout: deadline,
		ConnectTimeout: frontend.DefaultConnectTimeout, HeaderTimeout: frontend.DefaultHeaderTimeout,
		BodyTimeout: frontend.DefaultBodyTimeout, MaxInflight: frontend.DefaultMaxInflight,
		DisableKeepAlives: true}
}

// connText is how the front connects to the back with c.
func connText(c frontend.Config) string {
	if c.DisableKeepAlives {
		return "a new connection per call"
	}
	return "connections kept alive and reused"
}

// claimSteps are the steps of the claims' rows in the closed model
// (closed) or the open one.
func claimSteps(steps []step, closed bool) []step {
	var out []step
	for _, st := range steps {
		if st.isClaim() && (st.conns > 0) == closed {
			out = append(out, st)
		}
	}
	return out
}

// durText writes d as the setup does: "100 ms", "3 s", "3 min".
func durText(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// backText is what the back answers with c.
func backText(c backend.Config) string {
	s := "answers in " + durText(c.Delay)
	if c.SlowFraction > 0 {
		s += fmt.Sprintf("; 1 request in %.0f takes %s", 1/c.SlowFraction, durText(c.SlowDelay))
	}
	return s
}

// frontText is what bounds the front's call to the back with c.
func frontText(c frontend.Config) string {
	if c.Policy == frontend.None {
		return "no timeout"
	}
	return fmt.Sprintf("policy %s: %s on the whole call; connect %s, headers %s, body %s",
		c.Policy, durText(c.Timeout), durText(c.ConnectTimeout), durText(c.HeaderTimeout), durText(c.BodyTimeout))
}

func inflightText(c frontend.Config) string {
	return fmt.Sprintf("at most %d (503 beyond)", c.MaxInflight)
}

// quotaText is a service's quota (0: none).
func quotaText(cpu float64, memMB int) string {
	if cpu == 0 && memMB == 0 {
		return "no limit"
	}
	return fmt.Sprintf("%g CPU (cgroup quota; GOMAXPROCS follows it), %d MB", cpu, memMB)
}

// runsText lists the runs of steps: "20 s (no timeout) and 10 s (timeout)".
func runsText(steps []step) string {
	var parts []string
	for _, st := range steps {
		parts = append(parts, fmt.Sprintf("%s (%s)", durText(st.run), st.s.label))
	}
	return strings.Join(parts, " and ")
}

func closedLoadText(steps []step) string {
	if len(steps) == 0 {
		return "none"
	}
	return fmt.Sprintf("hlab load, %d connections, each sending its next request once answered; runs of %s, each ended at its duration",
		steps[0].conns, runsText(steps))
}

func openLoadText(steps []step) string {
	return fmt.Sprintf("hlab load at %d req/s; runs of %s; latency from each request's intended send", openRate, runsText(steps))
}

func closedWhy(o lab.Options) string {
	if o.Mode == lab.Full {
		return "the clock ends each run where the report's hand did, so each run's window is known"
	}
	return "quick mode keeps the experiment to minutes: each run is long against the 10 s stall, and --full runs 3 min as the report's siege did"
}

func openWhy(o lab.Options) string {
	if o.Mode == lab.Full {
		return "the same load in the lab's generator, which times latency from the intended send as vegeta does"
	}
	return "quick mode keeps the experiment to minutes: each run lasts until in flight has settled and a while after; --full runs 3 min as the report's vegeta did"
}

func roundsText(least, most int) string {
	return fmt.Sprintf("rounds of both rows in alternating order, at least %d and at most %d", least, most)
}
