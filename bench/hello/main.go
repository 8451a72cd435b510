// Command hello is the tiny HTTP server bench/loadgen-vs-wrk.sh measures
// against: keep-alive, answers every request with "hello\n".
//
// It is a fasthttp server, not net/http, so that the server is not what
// the benchmark measures: on one CPU net/http answered about 50,000 req/s
// to wrk at 100 connections and 40,000 at 1,000, no more than the open
// model's 50,000 req/s target, and every generator then sent less because
// the server could not keep up. fasthttp answered 92,000 and 64,000.
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8088", "listen address")
	flag.Parse()
	body := []byte("hello\n")
	log.Fatal(fasthttp.ListenAndServe(*addr, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBody(body)
	}))
}
