package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// apiFunc is a handler that returns its error; api writes it.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

// slowRequest is when a request is logged without AccessLog.
const slowRequest = time.Second

// route is one of the API's routes: a ServeMux pattern and its handler,
// either an apiFunc (traced, time-bounded, its error written as JSON) or
// a plain handler (the WebSocket, which outlives any request timeout, and
// the OpenAPI description).
type route struct {
	pattern string
	api     apiFunc
	plain   http.HandlerFunc
}

// routeTable is the API's one list of routes: routes serves it, and the
// tests hold it against the OpenAPI description (openapi.json).
func (s *Service) routeTable() []route {
	return []route{
		{pattern: "POST /v1/auth/signup", api: s.signup},
		{pattern: "POST /v1/auth/login", api: s.login},
		{pattern: "GET /v1/me", api: s.authed(s.me)},
		{pattern: "POST /v1/devices", api: s.authed(s.createDevice)},
		{pattern: "GET /v1/devices", api: s.authed(s.listDevices)},
		{pattern: "DELETE /v1/devices/{id}", api: s.authed(s.deleteDevice)},
		{pattern: "POST /v1/tasks", api: s.authed(s.createTask)},
		{pattern: "GET /v1/tasks", api: s.authed(s.listTasks)},
		{pattern: "GET /v1/tasks/{id}", api: s.authed(s.getTask)},
		{pattern: "PATCH /v1/tasks/{id}", api: s.authed(s.updateTask)},
		{pattern: "DELETE /v1/tasks/{id}", api: s.authed(s.deleteTask)},
		{pattern: "POST /v1/ws/ticket", api: s.authed(s.wsTicket)},
		{pattern: "GET /v1/ws", plain: s.websocket},
		{pattern: "GET /openapi.json", plain: serveOpenAPI},
	}
}

func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	var methods []string
	for _, rt := range s.routeTable() {
		if rt.api != nil {
			mux.Handle(rt.pattern, s.api(rt.pattern, rt.api))
		} else {
			mux.HandleFunc(rt.pattern, rt.plain)
		}
		if m, _, ok := strings.Cut(rt.pattern, " "); ok && !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	// Not a route. A catch-all pattern matches every method, so ServeMux
	// hands it the requests of a route's path with a method the route
	// lacks too (it answers 405 only when no pattern matches): they get
	// 405 with Allow here, and every other path a JSON 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r, methods); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, r, &InputError{Status: http.StatusMethodNotAllowed, Kind: "method_not_allowed",
				Reason: r.Method + " is not a method of " + r.URL.Path + ": use " + strings.Join(allow, " or ") + " (see GET /openapi.json)"})
			return
		}
		writeError(w, r, &InputError{Status: http.StatusNotFound, Kind: "no_route", Reason: "no such route: see GET /openapi.json for the routes"})
	})
	return mux
}

// allowedMethods returns the methods among methods that a route serves
// at r's path, asking mux itself, so that it matches paths exactly as
// serving does; HEAD goes with GET, as ServeMux serves it.
func allowedMethods(mux *http.ServeMux, r *http.Request, methods []string) []string {
	var allow []string
	probe := *r
	for _, m := range methods {
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	slices.Sort(allow)
	return allow
}

// api runs h as one traced, time-bounded request, and writes its error.
// The route's pattern names its span and log lines (ServeMux has put it in
// r.Pattern, which the shared server's metrics label requests by).
func (s *Service) api(pattern string, h apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)

		err := h(w, r)
		code := 0
		if err != nil {
			code = writeError(w, r, err)
			if code >= 500 {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.SetAttributes(attribute.Int("http.response.status_code", code))
		}
		elapsed := time.Since(start)
		result := "ok"
		if err != nil {
			result = strconv.Itoa(code) + ": " + err.Error()
		}
		switch {
		case code >= 500:
			s.log.ErrorContext(ctx, "request failed", "route", pattern, "ms", ms(elapsed), "result", result)
		case elapsed >= slowRequest:
			s.log.WarnContext(ctx, "slow request", "route", pattern, "ms", ms(elapsed), "result", result)
		case s.cfg.AccessLog:
			s.log.InfoContext(ctx, "request", "route", pattern, "ms", ms(elapsed), "result", result)
		}
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// writeError writes err as JSON with its status and returns the status.
func writeError(w http.ResponseWriter, r *http.Request, err error) int {
	code, body := status(err)
	if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
		body.TraceID = sc.TraceID().String()
	}
	var lim *LimitError
	switch {
	case errors.As(err, &lim) && lim.RetryAfter > 0:
		w.Header().Set("Retry-After", retryAfter(lim.RetryAfter))
	case code == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case code == http.StatusUpgradeRequired: // RFC 9110: it says which protocol
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
	}
	writeJSON(w, code, body)
	return code
}

// writeJSON writes v with status code. A failed write means the client
// went away: there is nobody to tell, so it returns nil.
func writeJSON(w http.ResponseWriter, code int, v any) error {
	buf := encodeBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBuffer {
			encodeBuffers.Put(buf)
		}
	}()
	b, err := appendAnswer((*buf)[:0], v)
	if err != nil {
		return fmt.Errorf("tasks: encode answer: %w", err)
	}
	b = append(b, '\n')
	*buf = b
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	// With a length, net/http sends the body as is instead of chunked
	// (it chunks bodies over 2 KB, a list of 20 tasks): fewer bytes and
	// one write to the socket.
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
	return nil
}

// decode reads a JSON object into v: JSON content type, at most
// MaxBodyBytes, no unknown fields, nothing after the object.
func (s *Service) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &InputError{Status: http.StatusUnsupportedMediaType, Kind: "unsupported_media_type", Reason: "send the body as JSON with Content-Type: application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, s.cfg.MaxBodyBytes)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return decodeError(err, s.cfg.MaxBodyBytes)
		}
		return malformed("", "the body must hold one JSON object and nothing after it")
	}
	return nil
}

func decodeError(err error, limit int64) error {
	var in *InputError
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &in):
		return in
	case errors.As(err, &tooBig):
		return &InputError{Status: http.StatusRequestEntityTooLarge, Kind: "body_too_large", Reason: fmt.Sprintf("the body must be at most %d bytes", limit)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &InputError{Status: http.StatusRequestTimeout, Kind: "body_timeout", Reason: "the body did not arrive within the server's read timeout: send it at once"}
	case errors.Is(err, io.EOF):
		return malformed("", "empty body: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("", "the JSON body ends too early")
	case errors.As(err, &syntax):
		return malformed("", "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Value == "null" && typ.Field != "" { // nonNull's
			return invalid(typ.Field, "must be a JSON %s, not null: leave the field out to keep its value (or its default)", jsonKind(typ.Type.Kind().String()))
		}
		if typ.Field == "" {
			return malformed("", "the body must be a JSON object")
		}
		return malformed(typ.Field, "must be a JSON %s", jsonKind(typ.Type.Kind().String()))
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return &InputError{Status: http.StatusBadRequest, Kind: "unknown_field", Field: f, Reason: "unknown field: remove it (see the API's fields)"}
	}
	return malformed("", "cannot read the body: %v", err)
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "integer"
	case strings.HasPrefix(goKind, "float"):
		return "number"
	case goKind == "string":
		return "string"
	case goKind == "bool":
		return "boolean"
	}
	return "value of the right type"
}

// isWebSocketUpgrade reports whether r asks for a WebSocket (Connection:
// Upgrade and Upgrade: websocket), as the WebSocket library checks before
// it answers a plain request with a text 426 of its own.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// headerHasToken reports whether the comma-separated values of header
// name hold token, in any case.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// pathID parses the {id} of a route.
func pathID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != v {
		return 0, malformed("id", "must be a positive integer, got %q", v)
	}
	return id, nil
}
