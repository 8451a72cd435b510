// Package loadgen is an HTTP load generator that measures the way wrk2,
// vegeta and k6 do: keep-alive connections, HDR latency histograms, and in
// the open model latency free of coordinated omission.
//
// # Two models
//
// The closed model (the default) keeps n connections busy: each sends its
// next request as soon as the previous one is answered, like wrk or siege.
// It finds the most a server can do, but when the server stalls the
// generator stalls with it and sends less, so a closed-model latency
// distribution under-reports stalls.
//
// The open model (Rate or Pace) sends requests on a schedule, whether or not
// earlier ones were answered, like vegeta, wrk2 and k6's constant-arrival-rate
// executor. Each request has an intended send time; its latency is measured
// from that time, so a request that had to wait for a free connection, or
// for the generator's CPU, carries the wait. The latency from the actual send
// time is kept beside it (Result.LatencyUncorrected) to show what a naive
// tool would have reported. Sends that went out more than 10 ms late and
// intended sends that never went out are counted in Result.Missed, never
// hidden. Connections caps the requests in flight; workers, each using one
// connection at a time, are started on demand up to that cap.
//
// # Example
//
//	res, err := loadgen.Run(ctx, "http://127.0.0.1:8080/",
//		loadgen.Rate(1000),
//		loadgen.Duration(10*time.Second),
//		loadgen.Connections(50),
//		loadgen.Header("Accept", "application/json"),
//		loadgen.OnProgress(func(p loadgen.Progress) {
//			fmt.Fprintf(os.Stderr, "\r%v %d requests", p.Elapsed.Round(time.Second), p.Requests)
//		}),
//	)
//	if err != nil {
//		return err // invalid options: one line, "loadgen: ..."
//	}
//	fmt.Printf("%.0f req/s, p99 %v (uncorrected %v), %d late sends\n",
//		res.RPS, res.Latency.P99, res.LatencyUncorrected.P99, res.Missed.Late)
//	return res.WriteSummary(os.Stdout) // or json.Marshal(res)
//
// # Scenarios
//
// For targets whose requests depend on earlier answers (sign in, create,
// then read what was created), WithScenario replaces the one repeated
// request with virtual users: a Scenario makes a VU per worker, the VU
// fills in each request (method, path under the URL, body, headers) and
// is handed each answer (status, body) to pick its next step, like a k6
// script. Both models work with it; the counting below is the same.
//
// # What counts
//
// A request succeeds when it gets an answer with status 200-399 within
// Timeout. Answers are counted by status code, requests without one by
// error kind (the Kind* constants: "timeout", "connection_refused",
// "connection_reset", "connection_closed", "dns", "no_free_conns",
// "other"). Nothing is retried. Requests still in flight when the duration
// ends are allowed to finish within their timeout and are counted;
// Result.Duration runs to the last completion.
//
// # Concurrency
//
// Run may be called from several goroutines at once; runs share nothing.
// Run blocks until the run is over and all its connections are closed. The
// OnProgress callback is called from one goroutine at a time, never
// concurrently with itself, the last time before Run returns. A Result is
// not modified after Run returns and may be read from several goroutines.
//
// # Transport and cost
//
// Against a plain http:// target on Linux, loads run on event loops, as
// wrk does: each loop is a goroutine owning its connections as non-blocking
// sockets in its own epoll set. The closed model runs GOMAXPROCS-1 of them
// (at least one, at most one per connection). The open model, with
// GOMAXPROCS <= 2, runs one: it walks the pacer's intended send times,
// woken for each by a timerfd in its epoll set, sends each due request on
// an idle connection (opening one, up to Connections, when none is idle)
// and reads the answers as they come. A loop keeps its P while it waits for
// events (that saves a fifth of the CPU per request), so with GOMAXPROCS=1
// a server in the same process may answer up to 10 ms late. The request is
// serialized once; each send is one write, each answer usually one read,
// framed and read whole as it arrives (Content-Length, chunked, or to the
// end of the connection).
//
// Everywhere else (https, scenarios, the open model with more CPUs, other
// systems, or with the Goroutines option) every worker is a goroutine
// owning one connection, written and read with fasthttp's Request.Write and
// Response.Read; in the open model a dispatcher hands each intended send to
// an idle worker. Either way the steady state allocates nothing per
// request, and the counting above is the same. When ctx is done, Run closes
// the connections under the requests in flight and returns at once, with
// Result.Interrupted set.
//
// Every run measures the CPU the process used and the CPUs it had
// (Result.Generator): a generator that used nearly all of them may have
// been the bottleneck.
package loadgen
