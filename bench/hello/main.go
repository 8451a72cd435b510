// Command hello is the tiny HTTP server bench/loadgen-vs-wrk.sh measures
// against: net/http, keep-alive, answers every request with "hello\n".
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8088", "listen address")
	flag.Parse()
	body := []byte("hello\n")
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
