// Package work is report A1's CPU-bound service: GET /handle does 1001
// iterations of json.Marshal of a random 10-letter string and answers
// "done!" as application/json. The work is the report's own, to the
// letter (Code), so our figures can stand beside its: report A2's app and
// log service run the same loop.
package work

import (
	"encoding/json"
	"math/rand"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Iterations is the report's loop count (i from 0 to 1000 inclusive).
const Iterations = 1001

// ReportCode is report A's handler (A1's /handle; A2's apps run the same
// loop) as the report prints it, in the words Code uses. Code is what Do
// and Handler run: while they run the report's work, the two are equal,
// and a change to Do that makes it other work must change Code, which
// the lab's setup then shows as a difference from the report's.
const ReportCode = `for i := 0; i <= 1000; i++ { _, _ = json.Marshal(randSeq(10)) }; ` +
	`randSeq: b := make([]rune, n); b[i] = letters[rand.Intn(len(letters))] over []rune("a…zA…Z"), ` +
	`the global math/rand source, locked; answer "done!" with Content-Type: application/json`

// Code is the work Do and Handler run, for the lab's setup beside the
// report's (ReportCode): a change to Do or Handler changes it too.
const Code = ReportCode

// letters is the report's alphabet, as runes: randSeq builds a []rune and
// converts it to a string, which costs more than bytes would.
var letters = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

// lockedSource is the global source of math/rand as the report's Go 1.19
// had it: one generator seeded with 1 behind a mutex, taken for every
// number. Since Go 1.20 the top-level functions draw from a lock-free
// per-thread generator instead (and rand.Seed is a no-op since 1.24), so
// calling rand.Intn here would run cheaper work than the report's.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (s *lockedSource) Int63() int64 {
	s.mu.Lock()
	n := s.src.Int63()
	s.mu.Unlock()
	return n
}

func (s *lockedSource) Seed(seed int64) {
	s.mu.Lock()
	s.src.Seed(seed)
	s.mu.Unlock()
}

// global is the report's rand.Intn: Go 1.19's globalRand.
var global = rand.New(&lockedSource{src: rand.NewSource(1)})

// RandomString is the report's randSeq: n random letters.
func RandomString(n int) string {
	b := make([]rune, n)
	for i := range b {
		b[i] = letters[global.Intn(len(letters))]
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
		// The report's header, though the body is not JSON.
		w.Header().Add("Content-Type", "application/json")
		w.Write([]byte("done!"))
	})
	return mux
}
