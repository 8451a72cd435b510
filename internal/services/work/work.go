// Package work is report A1's CPU-bound service: GET /handle does 1001
// iterations of json.Marshal of a random 10-letter string and answers
// "done!". The work is the report's own, so our figures can stand beside its.
package work

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Iterations is the report's loop count (i from 0 to 1000 inclusive).
const Iterations = 1001

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// RandomString returns n random letters.
func RandomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

// Do performs the report's CPU work once and returns how many bytes it
// marshalled, so the compiler cannot drop the loop.
func Do() int {
	total := 0
	for range Iterations {
		out, err := json.Marshal(RandomString(10))
		if err != nil {
			panic(err) // a string always marshals
		}
		total += len(out)
	}
	return total
}

// Handler serves GET /handle. It registers its metrics with reg.
func Handler(reg prometheus.Registerer) http.Handler {
	done := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "work_handled_total", Help: "Requests that did the CPU work.",
	})
	reg.MustRegister(done)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /handle", func(w http.ResponseWriter, r *http.Request) {
		Do()
		done.Inc()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("done!"))
	})
	return mux
}
