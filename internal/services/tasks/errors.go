package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors the handlers return; writeError maps them, and any other, to an
// HTTP status in one place.
var (
	// ErrNotFound: no such task or device among the caller's own (another
	// user's answers the same, so existence does not leak).
	ErrNotFound = errors.New("tasks: not found")
	// ErrUnauthorized: no bearer token, or one that is malformed, forged
	// or expired.
	ErrUnauthorized = errors.New("tasks: sign in first: send Authorization: Bearer TOKEN from /v1/auth/login")
	// ErrBadCredentials: login with an unknown email or a wrong password.
	ErrBadCredentials = errors.New("tasks: wrong email or password")
	// ErrEmailTaken: sign-up with an email that has an account.
	ErrEmailTaken = errors.New("tasks: an account with this email exists: log in instead")
	// ErrUpgradeRequired: GET /v1/ws without a WebSocket upgrade (a
	// plain HTTP request: curl, a browser's address bar).
	ErrUpgradeRequired = errors.New("tasks: this route is a WebSocket: open it with a WebSocket client (GET with Connection: Upgrade and Upgrade: websocket)")
	// ErrBusy: the request's database work did not finish within the
	// request timeout (pool exhausted or database overloaded).
	ErrBusy = errors.New("tasks: the database is busy: retry later")
)

// InputError is invalid input: a malformed or unknown field (400), a
// value out of range (422), a body too large (413), of the wrong type
// (415) or that did not arrive within the server's read timeout (408).
// Nothing is written when a handler returns one.
type InputError struct {
	Status int    // HTTP status
	Kind   string // machine-readable kind: "malformed_json", "invalid_field", ...
	Field  string // the offending field or query parameter, "" for the body as a whole
	Reason string // what is wrong and what to send instead
}

func (e *InputError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("tasks: %s: %s", e.Field, e.Reason)
	}
	return "tasks: " + e.Reason
}

func invalid(field, format string, args ...any) *InputError {
	return &InputError{Status: http.StatusUnprocessableEntity, Kind: "invalid_field", Field: field, Reason: fmt.Sprintf(format, args...)}
}

func malformed(field, format string, args ...any) *InputError {
	return &InputError{Status: http.StatusBadRequest, Kind: "malformed_request", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// LimitError is a request over one of the service's limits: too many
// login attempts or sign-ups, too many WebSockets of one user (429), too
// many WebSockets on the server (503), each with a Retry-After header
// that says when to try again; or too many devices (409: only deleting
// one helps, no Retry-After).
type LimitError struct {
	Kind       string        // "too_many_logins", "too_many_signups", "too_many_websockets", "server_full", "too_many_devices"
	Reason     string        // which limit, and what to do
	RetryAfter time.Duration // until a retry can succeed (rounded up to seconds, at least 1); 0: no Retry-After
	Status     int           // the answer's status: 0 is 429
}

func (e *LimitError) Error() string { return "tasks: " + e.Reason }

// retryAfter is a Retry-After header's value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// errorBody is every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Reason  string `json:"reason"`
	Field   string `json:"field,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// status maps an error to its HTTP status and body.
func status(err error) (int, errorBody) {
	var in *InputError
	var lim *LimitError
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &in):
		return in.Status, errorBody{Error: in.Kind, Reason: in.Reason, Field: in.Field}
	case errors.As(err, &lim):
		return cmp.Or(lim.Status, http.StatusTooManyRequests), errorBody{Error: lim.Kind, Reason: lim.Reason}
	case errors.Is(err, ErrNotFound), errors.Is(err, pgx.ErrNoRows):
		return http.StatusNotFound, errorBody{Error: "not_found", Reason: "no such resource among yours"}
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, errorBody{Error: "unauthorized", Reason: ErrUnauthorized.Error()[len("tasks: "):]}
	case errors.Is(err, ErrBadCredentials):
		return http.StatusUnauthorized, errorBody{Error: "bad_credentials", Reason: ErrBadCredentials.Error()[len("tasks: "):]}
	case errors.Is(err, ErrEmailTaken):
		return http.StatusConflict, errorBody{Error: "email_taken", Reason: ErrEmailTaken.Error()[len("tasks: "):], Field: "email"}
	case errors.Is(err, ErrUpgradeRequired):
		return http.StatusUpgradeRequired, errorBody{Error: "upgrade_required", Reason: ErrUpgradeRequired.Error()[len("tasks: "):]}
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this (nginx logs it as 499).
		return 499, errorBody{Error: "client_closed_request", Reason: "the client closed the request"}
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, errorBody{Error: "busy", Reason: ErrBusy.Error()[len("tasks: "):]}
	case errors.As(err, &pg) && pg.Code == "53300": // too_many_connections
		return http.StatusServiceUnavailable, errorBody{Error: "busy", Reason: "the database has too many connections: retry later"}
	}
	return http.StatusInternalServerError, errorBody{Error: "internal", Reason: "internal error; the log has details under this trace id"}
}
