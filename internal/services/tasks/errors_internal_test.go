package tasks

import (
	"fmt"
	"net/http"
	"os"
	"testing"
)

// A body cut off by the server's read timeout is a 408, not malformed.
func TestDecodeErrorSlowBody(t *testing.T) {
	err := decodeError(fmt.Errorf("read tcp 127.0.0.1:8080->127.0.0.1:5555: %w", os.ErrDeadlineExceeded), 1024)
	if code, body := status(err); code != http.StatusRequestTimeout || body.Error != "body_timeout" {
		t.Fatalf("status = %d %+v, want 408 body_timeout", code, body)
	}
}
