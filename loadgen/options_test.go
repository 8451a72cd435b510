package loadgen

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	const u = "http://127.0.0.1:1/"
	d := Duration(time.Second)
	tests := []struct {
		name string
		url  string
		opts []Option
		want error
	}{
		{"no bound", u, nil, ErrNoBound},
		{"ftp scheme", "ftp://host/", []Option{d}, ErrInvalidURL},
		{"no scheme", "127.0.0.1:8080/", []Option{d}, ErrInvalidURL},
		{"no host", "http:///path", []Option{d}, ErrInvalidURL},
		{"unparsable", "http://[::1/", []Option{d}, ErrInvalidURL},
		{"zero duration", u, []Option{Duration(0)}, ErrInvalidDuration},
		{"negative duration", u, []Option{Duration(-time.Second)}, ErrInvalidDuration},
		{"zero requests", u, []Option{Requests(0)}, ErrInvalidRequests},
		{"zero rate", u, []Option{d, Rate(0)}, ErrInvalidRate},
		{"negative rate", u, []Option{d, Rate(-5)}, ErrInvalidRate},
		{"NaN rate", u, []Option{d, Rate(math.NaN())}, ErrInvalidRate},
		{"infinite rate", u, []Option{d, Rate(math.Inf(1))}, ErrInvalidRate},
		{"nil pacer", u, []Option{d, Pace(nil)}, ErrInvalidRate},
		{"zero connections", u, []Option{d, Connections(0)}, ErrInvalidConnections},
		{"zero connections, open", u, []Option{d, Rate(10), Connections(0)}, ErrInvalidConnections},
		{"zero timeout", u, []Option{d, Timeout(0)}, ErrInvalidTimeout},
		{"empty method", u, []Option{d, Method("")}, ErrInvalidMethod},
		{"method with space", u, []Option{d, Method("GET X")}, ErrInvalidMethod},
		{"header without name", u, []Option{d, Header("", "v")}, ErrInvalidHeader},
		{"header name with colon", u, []Option{d, Header("a:b", "v")}, ErrInvalidHeader},
		{"header value with newline", u, []Option{d, Header("X", "a\r\nB: c")}, ErrInvalidHeader},
		{"duration", u, []Option{d}, nil},
		{"count", u, []Option{Requests(1)}, nil},
		{"both bounds", u, []Option{d, Requests(10)}, nil},
		{"open", u, []Option{d, Rate(0.5), Connections(3)}, nil},
		{"https and ipv6", "https://[::1]:8443/x?y=1", []Option{d}, nil},
		{"nil option ignored", u, []Option{nil, d}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newCfg(tt.url, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("newCfg(%q) error = %v, want %v", tt.url, err, tt.want)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "loadgen: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with \"loadgen: \"", msg)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c, err := newCfg("http://example.com/x", []Option{Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if c.conns != 1 || c.open || c.method != "GET" || c.timeout != 10*time.Second || c.addr != "example.com:80" {
		t.Errorf("closed defaults: %+v", c)
	}
	c, err = newCfg("https://example.com/x", []Option{Duration(time.Second), Rate(100)})
	if err != nil {
		t.Fatal(err)
	}
	if c.conns != 1000 || !c.open || c.addr != "example.com:443" || !c.isTLS {
		t.Errorf("open defaults: %+v", c)
	}
}

func TestRunInvalidReturnsNoResult(t *testing.T) {
	res, err := Run(context.Background(), "http://127.0.0.1:1/")
	if !errors.Is(err, ErrNoBound) || res != nil {
		t.Fatalf("Run() = %v, %v; want nil, ErrNoBound", res, err)
	}
}

func TestConstantPacer(t *testing.T) {
	p := ConstantPacer{Freq: 1000}
	if got := p.At(4999); got != 4999*time.Millisecond {
		t.Errorf("At(4999) = %v", got)
	}
	tests := []struct {
		p    Pacer
		t    time.Duration
		want uint64
	}{
		{ConstantPacer{Freq: 1000}, 5 * time.Second, 5000},
		{ConstantPacer{Freq: 1000}, 5*time.Second + 1, 5001},
		{ConstantPacer{Freq: 3}, time.Second, 3},
		{ConstantPacer{Freq: 0.5}, 5 * time.Second, 3},
		{ConstantPacer{Freq: 10}, 0, 0},
	}
	for _, tt := range tests {
		if got := dueBefore(tt.p, tt.t); got != tt.want {
			t.Errorf("dueBefore(%v, %v) = %d, want %d", tt.p, tt.t, got, tt.want)
		}
	}
}
