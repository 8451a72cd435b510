package hello_test

import (
	"net/http/httptest"
	"testing"

	"github.com/highload-lab/hlab/internal/services/hello"
)

func TestHello(t *testing.T) {
	h := hello.Handler()
	for _, tt := range []struct {
		path string
		code int
		body string
	}{
		{"/", 200, "Hello, World!\n"},
		{"/other", 404, "404 page not found\n"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", tt.path, nil))
		if w.Code != tt.code || w.Body.String() != tt.body {
			t.Errorf("GET %s = %d %q, want %d %q", tt.path, w.Code, w.Body.String(), tt.code, tt.body)
		}
	}
}
