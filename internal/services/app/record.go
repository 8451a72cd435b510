package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/services/eventlog"
)

// syncRecorder POSTs each event to the event log and waits for its answer.
type syncRecorder struct {
	url     string
	timeout time.Duration
	client  *http.Client
}

func newSyncRecorder(cfg Config) *syncRecorder {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &syncRecorder{
		url:     strings.TrimSuffix(cfg.EventLog, "/") + "/events",
		timeout: cfg.Timeout,
		client: &http.Client{
			Timeout: cfg.Timeout, // the request's context carries it too; this also bounds the body
			Transport: &http.Transport{
				DialContext:           dialer.DialContext,
				ResponseHeaderTimeout: cfg.Timeout,
				MaxIdleConnsPerHost:   min(cfg.MaxInflight, 256),
				MaxConnsPerHost:       cfg.MaxInflight,
				IdleConnTimeout:       90 * time.Second,
				DisableCompression:    true,
			},
		},
	}
}

func (s *syncRecorder) record(ctx context.Context, ev eventlog.Event, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("app: event log request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(eventlog.IDHeader, ev.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return httpError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return httpError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return nil
}

// httpError maps a failed POST to the errors of errors.go.
func httpError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrClientGone, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: the event log: %v", ErrTimeout, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the event log: %v", ErrUnreachable, err)
	}
	return fmt.Errorf("app: posting the event: %w", err)
}

func (s *syncRecorder) ready() error { return nil }

func (s *syncRecorder) close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

// databusRecorder publishes each event through the databus gateway and
// waits until Kafka stored it.
type databusRecorder struct {
	client  *databus.Client
	pub     *databus.Publisher
	timeout time.Duration
}

func newDatabusRecorder(cfg Config) (*databusRecorder, error) {
	c, err := databus.Dial(cfg.Databus, cfg.DatabusCredentials.Options()...)
	if err != nil {
		return nil, fmt.Errorf("app: databus gateway at %s: %w", cfg.Databus, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	pub, err := c.NewPublisher(ctx, cfg.Topic)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("app: databus publisher for %q: %w", cfg.Topic, err)
	}
	return &databusRecorder{client: c, pub: pub, timeout: cfg.Timeout}, nil
}

func (d *databusRecorder) record(ctx context.Context, ev eventlog.Event, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	err := d.pub.Publish(ctx, databus.Message{
		Key: []byte(ev.ID), Value: payload,
		Headers: []databus.Header{{Key: eventlog.RecordIDHeader, Value: []byte(ev.ID)}},
	})
	if err != nil {
		return gatewayError(ctx, err)
	}
	return nil
}

func (d *databusRecorder) ready() error { return nil }

func (d *databusRecorder) close(ctx context.Context) error {
	closed := make(chan struct{})
	go func() { d.pub.Close(); close(closed) }() // waits for answers to what is in flight
	var err error
	select {
	case <-closed:
	case <-ctx.Done():
		err = errors.New("app: the databus gateway did not answer the publishes in flight before the flush deadline")
	}
	d.client.Close()
	return err
}
