package refdata

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// AgeHeader is the header every answer of a replica-backed service
// carries: the replica's age (Replica.Age) in seconds, to the
// millisecond.
const AgeHeader = "X-Replica-Age"

// Fresh is nil while every table's data is within the replica's
// staleness bound; else the first table's *replica.StaleError
// (errors.Is(err, replica.ErrStale)).
func (r *Replica) Fresh() error {
	now := time.Now() // one clock read for every table: Check runs per request
	for _, t := range r.tables {
		if err := t.fresh(now); err != nil {
			return err
		}
	}
	return nil
}

// Age is the oldest of the tables' ages: how long since the source last
// confirmed they held everything the database had committed.
func (r *Replica) Age() time.Duration {
	var age time.Duration
	now := time.Now()
	for _, t := range r.tables {
		age = max(age, t.age(now))
	}
	return age
}

// Check is what a request handler asks before it reads the replica:
// errs.NotLoaded before the first load, errs.TooOld (wrapping the
// *replica.StaleError, which names the age) once its data is older than
// its bound, else nil.
func (r *Replica) Check(errs Errors) error {
	if !r.Loaded() {
		return errs.NotLoaded
	}
	if err := r.Fresh(); err != nil {
		return fmt.Errorf("%w: %w", errs.TooOld, err)
	}
	return nil
}

// Fresh is nil when the service may take traffic as far as its data's
// age goes: always without a replica (it reads Postgres, whose health
// Ready tells), else Replica.Fresh. /readyz reads it.
func (b *Backend) Fresh() error {
	if b.Rep == nil {
		return nil
	}
	return b.Rep.Fresh()
}

// WithReplicaAge sets AgeHeader on every answer of h (nothing without a
// replica), so a client or a proxy can tell how old what it got may be.
func (b *Backend) WithReplicaAge(h http.Handler) http.Handler {
	if b.Rep == nil {
		return h
	}
	var last atomic.Pointer[ageValue]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer at tens of thousands a second: the value is
		// formatted once per millisecond of age, and set by its canonical
		// key without Header.Set's canonicalizing and allocating.
		ms := b.Rep.Age().Milliseconds()
		v := last.Load()
		if v == nil || v.ms != ms {
			v = &ageValue{ms: ms, header: []string{strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)}}
			last.Store(v)
		}
		w.Header()[AgeHeader] = v.header[:1:1] // full: an Add copies, never writes the shared array
		h.ServeHTTP(w, r)
	})
}

// ageValue is AgeHeader's value for an age of ms milliseconds.
type ageValue struct {
	ms     int64
	header []string
}
