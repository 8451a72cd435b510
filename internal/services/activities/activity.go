package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
)

// Limits of what a client may send.
const (
	// DefaultMaxBodyBytes bounds a POST /activities body.
	DefaultMaxBodyBytes = 16 << 10
	// MaxDataBytes bounds an activity's data, as compact JSON.
	MaxDataBytes = 8 << 10
	// MaxFuture is how far ahead of the server's clock a timestamp may be.
	MaxFuture = time.Hour
	// DefaultLimit and MaxLimit bound GET /activities.
	DefaultLimit = 20
	MaxLimit     = 100
)

// minTime is the earliest timestamp accepted.
var minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Activity is one user event. Time has millisecond precision, what
// Cassandra's timestamp keeps, so both stores return what was written.
type Activity struct {
	ID     uuid.UUID       `json:"id"`
	UserID uuid.UUID       `json:"user_id"`
	Time   time.Time       `json:"timestamp"`
	Data   json.RawMessage `json:"data"`
}

// newActivity returns an activity with a new random id at now (ms).
func newActivity(user uuid.UUID, at time.Time, data json.RawMessage) Activity {
	return Activity{ID: uuid.New(), UserID: user, Time: at.UTC().Truncate(time.Millisecond), Data: data}
}

// RandomActivity is report A3's activity on our table: a random user,
// now, and as data the JSON of a random 100-letter string, drawn as the
// report's app drew it (randSeq).
func RandomActivity() Activity {
	return newActivity(uuid.New(), time.Now(), randomData())
}

// NewActivity is the body of POST /activities.
type NewActivity struct {
	// UserID is required: a UUID.
	UserID string `json:"user_id"`
	// Data is required: any JSON value but null, at most MaxDataBytes
	// once compacted.
	Data json.RawMessage `json:"data"`
	// Timestamp is optional (RFC 3339; default: the server's clock), from
	// 2000 to MaxFuture ahead of the server's clock.
	Timestamp *time.Time `json:"timestamp,omitempty"`
}

// parseNew reads and validates a POST /activities body from r, which the
// caller bounds. Every error wraps ErrBadRequest (or ErrTooLarge) and
// says what is wrong.
func parseNew(r io.Reader, now time.Time) (Activity, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var in NewActivity
	if err := dec.Decode(&in); err != nil {
		return Activity{}, bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Activity{}, fmt.Errorf("%w: the body must hold one JSON object and nothing after it", ErrBadRequest)
	}
	if in.UserID == "" {
		return Activity{}, fmt.Errorf(`%w: "user_id" is required`, ErrBadRequest)
	}
	user, err := uuid.Parse(in.UserID)
	if err != nil || len(in.UserID) != 36 {
		return Activity{}, fmt.Errorf(`%w: "user_id" must be a UUID like 7c9e6679-7425-40de-944b-e07fc1f90ae7, not %.40q`, ErrBadRequest, in.UserID)
	}
	if len(in.Data) == 0 || bytes.Equal(in.Data, []byte("null")) {
		return Activity{}, fmt.Errorf(`%w: "data" is required (any JSON value but null)`, ErrBadRequest)
	}
	var data bytes.Buffer
	if err := json.Compact(&data, in.Data); err != nil {
		return Activity{}, fmt.Errorf(`%w: "data": %v`, ErrBadRequest, err)
	}
	if data.Len() > MaxDataBytes {
		return Activity{}, fmt.Errorf(`%w: "data" is %d bytes of JSON, more than the %d allowed`, ErrBadRequest, data.Len(), MaxDataBytes)
	}
	at := now
	if in.Timestamp != nil {
		at = *in.Timestamp
		if at.Before(minTime) || at.After(now.Add(MaxFuture)) {
			return Activity{}, fmt.Errorf(`%w: "timestamp" %s is out of range (from %s to an hour ahead of the server's clock)`,
				ErrBadRequest, at.Format(time.RFC3339), minTime.Format("2006"))
		}
	}
	return newActivity(user, at, data.Bytes()), nil
}

// bodyError explains a decoding error.
func bodyError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: it did not arrive within the server's read timeout: send it at once", ErrSlowBody)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the body is empty; send a JSON object like {\"user_id\": \"<uuid>\", \"data\": {...}}", ErrBadRequest)
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, mbe.Limit)
	case errors.As(err, &syn):
		return fmt.Errorf("%w: malformed JSON at byte %d: %v", ErrBadRequest, syn.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the JSON body ends too early", ErrBadRequest)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Errorf("%w: %q must be %s, not %s", ErrBadRequest, typ.Field, typeName(typ.Type.String()), typ.Value)
		}
		return fmt.Errorf("%w: the body must be a JSON object, not %s", ErrBadRequest, typ.Value)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf(`%w: "timestamp" must be RFC 3339, like 2026-01-02T15:04:05.123Z, not %s`, ErrBadRequest, pe.Value)
	}
	// Unknown fields and the like: the decoder's message
	// says which.
	return fmt.Errorf("%w: %v", ErrBadRequest, err)
}

func typeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "time.Time":
		return "an RFC 3339 timestamp"
	}
	return goType
}
