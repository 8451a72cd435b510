package loadgen

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestErrorKind(t *testing.T) {
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fasthttp.ErrTimeout, KindTimeout},
		{fmt.Errorf("error when dialing 1.2.3.4:80: %w", fasthttp.ErrDialTimeout), KindTimeout},
		{fmt.Errorf("reading body: %w", os.ErrDeadlineExceeded), KindTimeout},
		{&net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, KindTimeout},
		{opErr("dial", syscall.ECONNREFUSED), KindConnectionRefused},
		{fmt.Errorf("error when reading response headers: %w", opErr("read", syscall.ECONNRESET)), KindConnectionReset},
		{fasthttp.ErrConnectionClosed, KindConnectionClosed},
		{io.EOF, KindConnectionClosed},
		{fmt.Errorf("body: %w", io.ErrUnexpectedEOF), KindConnectionClosed},
		{opErr("write", syscall.EPIPE), KindConnectionClosed},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}}, KindDNS},
		{fasthttp.ErrNoFreeConns, KindNoFreeConns},
		{errors.New("tls: bad certificate"), KindOther},
	}
	for _, tt := range tests {
		if got := ErrorKind(tt.err); got != tt.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
