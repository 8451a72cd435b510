// Package hello is the smallest Go HTTP service: GET / answers "Hello,
// World!". The lab runs it under the same quota as a service it measures,
// in the same run, as the ceiling of what net/http (with hlab's shared
// /healthz, /metrics and request metrics) serves on that quota.
package hello

import (
	"net/http"
)

var body = []byte("Hello, World!\n")

// Handler serves GET /.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(body)
	})
	return mux
}
