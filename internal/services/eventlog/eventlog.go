// Package eventlog is report A2's event log: the side effect that report's
// app records for every request, and the work it costs.
//
// Sync path (hlab serve eventlog): POST /events does the report's log
// work (Log: 1001 × json.Marshal of a random 50-char string) and answers
// "event is saved!". The app calls it inside each request, so its cost is
// on the request path.
//
// Async path (hlab serve eventlog --consume): a Consumer is a member of a
// Kafka consumer group on the events topic; it does the same log work per
// event and commits an offset only after every event before it was
// processed, so an event Kafka stored is processed at least once, even
// across crashes and rebalances. Redeliveries are recognized by event id
// within a bounded window and counted as duplicates, not processed again.
// Its lag (records in Kafka it has not processed yet) is a gauge.
//
// The event format (Event) belongs here; the app (internal/services/app)
// encodes it, this package decodes it.
package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/services/work"
)

// LogStringLen is the length of the string the log work marshals.
const LogStringLen = 50

// Log does the report's log work once: work.Iterations (1001) ×
// json.Marshal of a random 50-char string, the string made afresh each
// time as report A1's work does. It returns the bytes marshalled, so the
// compiler cannot drop the loop.
func Log() int {
	total := 0
	for range work.Iterations {
		out, err := json.Marshal(work.RandomString(LogStringLen))
		if err != nil {
			panic(err) // a string always marshals
		}
		total += len(out)
	}
	return total
}

// Event is one user event, as the app records it: in the body of
// POST /events and as the value of a Kafka record (whose key is the ID).
type Event struct {
	// ID is unique per event (a random UUID): the app answers it in
	// IDHeader, and the consumer recognizes redeliveries by it.
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// Body is the event's payload: a random 100-char string in report A2.
	Body string `json:"body"`
}

// IDHeader carries the event id: on the app's answer, and on POST /events.
const IDHeader = "X-Event-Id"

// RecordIDHeader is the Kafka record header with the event id (the
// record's key holds it too).
const RecordIDHeader = "event-id"

// Saved is the event log's answer to POST /events (the report's).
const Saved = "event is saved!"

// MaxEventBytes bounds the body of POST /events.
const MaxEventBytes = 64 << 10

// Handler serves POST /events: it reads the event (at most
// MaxEventBytes), does the log work and answers Saved. It registers its
// metrics with reg.
func Handler(reg prometheus.Registerer) http.Handler {
	saved := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "eventlog_http_events_total", Help: "Events saved through POST /events (the sync path).",
	})
	reg.MustRegister(saved)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", func(w http.ResponseWriter, r *http.Request) {
		if err := readEvent(w, r); err != nil {
			http.Error(w, err.Error(), statusOf(err))
			return
		}
		Log()
		saved.Inc()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, Saved)
	})
	return mux
}

// readEvent reads the body of POST /events: at most MaxEventBytes, not
// empty, within the server's read timeout.
func readEvent(w http.ResponseWriter, r *http.Request) error {
	n, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, MaxEventBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return fmt.Errorf("%w: at most %d bytes", ErrEventTooLarge, MaxEventBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrSlowEvent, err)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadEvent, err)
	case n == 0:
		return fmt.Errorf("%w: empty event: POST the event as the body", ErrBadEvent)
	}
	return nil
}
