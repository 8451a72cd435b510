package gateway_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/gateway"
)

// The member's flags parse to the Config New takes (--member-grace 0:
// leave at once), and New refuses what cannot work, naming the flag.
func TestMemberFlags(t *testing.T) {
	parse := func(args ...string) gateway.Options {
		t.Helper()
		var o gateway.Options
		fs := flag.NewFlagSet("databus", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return o
	}
	if o := parse(); o.MemberGrace != 0 || o.IsolationLevel != gateway.IsolationReadCommitted {
		t.Errorf("defaults: grace %v, isolation %q", o.MemberGrace, o.IsolationLevel)
	}
	o := parse("--member-grace=0", "--isolation-level=read_uncommitted")
	if o.MemberGrace >= 0 || o.IsolationLevel != gateway.IsolationReadUncommitted {
		t.Errorf("--member-grace=0: grace %v (want negative: none); isolation %q", o.MemberGrace, o.IsolationLevel)
	}
	if args := strings.Join(o.Args(), " "); !strings.Contains(args, "--member-grace=0s") || !strings.Contains(args, "--isolation-level=read_uncommitted") {
		t.Errorf("Args = %s", args)
	}
	for _, tt := range []struct {
		cfg  gateway.Config
		flag string
	}{
		{gateway.Config{MemberGrace: 11 * time.Second}, "--member-grace"}, // above the 10s session timeout
		{gateway.Config{SessionTimeout: 3 * time.Second, MemberGrace: 4 * time.Second}, "--member-grace"},
		{gateway.Config{IsolationLevel: "serializable"}, "--isolation-level"},
	} {
		tt.cfg.Brokers = []string{"127.0.0.1:1"}
		_, err := gateway.New(tt.cfg)
		if !errors.Is(err, gateway.ErrBadLimit) || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("New(%+v) = %v, want ErrBadLimit naming %s", tt.cfg, err, tt.flag)
		}
	}
	// A session timeout below the default grace shortens the grace.
	g, err := gateway.New(gateway.Config{Brokers: []string{"127.0.0.1:1"}, SessionTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("session timeout 3s, grace by default: %v", err)
	}
	g.Close()
}
