package crudexp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// sink is the webhook the service posts notifications to, and the OTLP
// collector it exports traces to: in the lab's process, outside the
// quota, answering at once (an empty ExportTraceServiceResponse is an
// empty body).
type sink struct {
	url, otlpURL string
	srv          *http.Server
	calls        atomic.Int64
	otlpBytes    atomic.Int64
}

// startSinks starts the webhook and OTLP sink every service posts to.
func (b *bench) startSinks() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("crud: webhook sink: %w", err)
	}
	base := "http://" + ln.Addr().String()
	s := &sink{url: base + "/push", otlpURL: base + "/v1/traces"}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			s.otlpBytes.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
			return
		}
		s.calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	b.hook = s
	return nil
}

func (s *sink) close() { s.srv.Close() }
