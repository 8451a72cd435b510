package databus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// Client is one gRPC connection to a databus gateway. Streams opened from
// one Client share its TCP connection, which serializes them under load
// (the report's lesson): give each busy publisher or subscriber its own
// Client. A Client is safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	api  databusv1.DataBusClient
	cfg  cfg
}

type cfg struct {
	dialOpts   []grpc.DialOption
	minBackoff time.Duration
	maxBackoff time.Duration

	creds          credentials.TransportCredentials // nil: plaintext
	token          string
	tokenFile      string
	plaintextToken bool
	errs           []error // from options, returned by Dial
}

// Option configures a Client.
type Option func(*cfg)

// WithDialOptions adds gRPC dial options (interceptors, credentials of
// other kinds). Without credentials (these, WithTLS or WithTLSFiles) the
// connection is plaintext.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *cfg) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithBackoff sets the reconnect backoff bounds (default 50ms to 5s,
// doubling, with jitter) of publishers and subscriptions, and of the gRPC
// connection under them: without it, gRPC's own backoff grows to two
// minutes, and a client would come back that long after a gateway did.
func WithBackoff(min, max time.Duration) Option {
	return func(c *cfg) { c.minBackoff, c.maxBackoff = min, max }
}

// Dial connects to the gateway at target (host:port). The connection is
// made lazily and re-made by gRPC when it breaks.
func Dial(target string, opts ...Option) (*Client, error) {
	c := cfg{minBackoff: 50 * time.Millisecond, maxBackoff: 5 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	if c.minBackoff <= 0 || c.maxBackoff < c.minBackoff {
		return nil, fmt.Errorf("databus: backoff %s..%s: give 0 < min <= max", c.minBackoff, c.maxBackoff)
	}
	creds, err := c.credentials()
	if err != nil {
		return nil, err
	}
	dial := append([]grpc.DialOption{
		// 32 KiB buffers, as the report chose: the defaults cost too much
		// memory at thousands of connections.
		grpc.WithReadBufferSize(32 << 10),
		grpc.WithWriteBufferSize(32 << 10),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: c.minBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: c.maxBackoff},
			MinConnectTimeout: 20 * time.Second,
		}),
	}, creds...)
	conn, err := grpc.NewClient(target, append(dial, c.dialOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("databus: dial %s: %w", target, err)
	}
	return &Client{conn: conn, api: databusv1.NewDataBusClient(conn), cfg: c}, nil
}

// Close closes the connection; open streams end.
func (c *Client) Close() error { return c.conn.Close() }

// Message is a message to publish.
type Message struct {
	Key, Value []byte
	Headers    []Header
}

// Header is a message header.
type Header struct {
	Key   string
	Value []byte
}

// Retryable reports whether an error from this package may succeed when
// tried again (the gateway or Kafka was unavailable, a deadline passed),
// as opposed to a request that is wrong (InvalidArgument, NotFound, ...).
func Retryable(err error) bool {
	var pe *PublishError
	if errors.As(err, &pe) {
		for _, r := range pe.Records {
			if !retryableCode(r.Code) {
				return false
			}
		}
		return true
	}
	if _, refused := refusedBatch(err); refused {
		return false
	}
	return retryableCode(status.Code(err))
}

// refusedBatch reports whether the gateway ended a publish stream because
// it will never take one batch (too large), and that batch's id (0 when
// the gateway could not read it).
func refusedBatch(err error) (id uint64, ok bool) {
	reason, md := databusv1.Reason(err)
	if reason != databusv1.ReasonBatchRefused {
		return 0, tooLargeForGRPC(err)
	}
	id, _ = strconv.ParseUint(md["batch_id"], 10, 64)
	return id, true
}

// tooLargeForGRPC reports whether err is gRPC's own refusal of a message
// over the server's receive limit: gRPC ends the stream with it before
// the gateway sees the batch, so it carries no ErrorInfo; its text has
// been the same since grpc-go 1.0.
func tooLargeForGRPC(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.HasPrefix(st.Message(), "grpc: received message larger than max")
}

// batchRefusedError is what a batch the gateway refused fails with: the
// gateway's status, or gRPC's with what to do added.
func batchRefusedError(err error) error {
	if !tooLargeForGRPC(err) {
		return err
	}
	return databusv1.BatchRefused(codes.ResourceExhausted, 0, fmt.Sprintf("databus: the gateway refused a batch larger than it receives (%s, in bytes): split it; a batch may carry up to the gateway's --max-stream-bytes of messages", status.Convert(err).Message()))
}

// Moved reports whether err is how the gateway ended a stream in good
// order so that its client reconnects, through its load balancer, maybe
// to another gateway: the connection reached the gateway's
// --max-connection-age, or the gateway is stopping. Every batch the
// gateway read was answered and every ack committed; reopen the stream
// at once, without backoff (Publisher and Subscribe do), and do not
// count it as a failure.
func Moved(err error) bool {
	reason, _ := databusv1.Reason(err)
	return reason == databusv1.ReasonStreamMoved
}

func retryableCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Canceled:
		return true
	}
	return false
}

// PublishError says which records of a batch Kafka did not store.
type PublishError struct {
	Stored  int
	Records []RecordError
}

// RecordError is one record that was not stored.
type RecordError struct {
	Index   int
	Code    codes.Code
	Message string
}

func (e *PublishError) Error() string {
	first := e.Records[0]
	return fmt.Sprintf("databus: %d of %d records not stored; first: #%d %s: %s", len(e.Records), e.Stored+len(e.Records), first.Index, first.Code, first.Message)
}

// backoff returns the wait before reconnect n (0-based).
func (c *Client) backoff(n int) time.Duration {
	return jitteredBackoff(c.cfg.minBackoff, c.cfg.maxBackoff, n)
}

// jitteredBackoff returns the wait before retry n (0-based): first,
// doubled n times, at most max, drawn between half of that and all of it,
// so that the retries of many clients after one outage spread out. Both
// reconnects (WithBackoff) and redeliveries after a handler's error
// (RetryDelay) wait this.
func jitteredBackoff(first, max time.Duration, n int) time.Duration {
	d := first << min(n, 16)
	if d > max || d <= 0 {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// streamContext attaches stream settings as gRPC metadata.
func streamContext(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}
