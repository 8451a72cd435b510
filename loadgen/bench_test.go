package loadgen

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/highload-lab/hlab/internal/testkit"
)

// BenchmarkClosed measures the closed model's hot path against an in-process
// fasthttp server, which allocates nothing per request, so allocs/req is the
// generator's own (Run's setup amortized over 5000 requests).
func BenchmarkClosed(b *testing.B) {
	ln := testkit.Listen(b)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("hello\n") }}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	url := "http://" + ln.Addr().String() + "/"

	for _, conns := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("connections=%d", conns), func(b *testing.B) {
			const perRun = 5000
			var requests int64
			var elapsed time.Duration
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				res := run(b, url, Connections(conns), Requests(perRun))
				requests += res.Requests
				elapsed += res.Duration
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(requests)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(requests), "allocs/req")
		})
	}
}
