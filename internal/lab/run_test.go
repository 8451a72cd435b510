package lab_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// TestStartServicePortsRetriesOnlyATakenPort checks that a service that
// could not bind its port is started again on new ports (three sets in
// all), and one that failed for another reason is not.
func TestStartServicePortsRetriesOnlyATakenPort(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, tc := range []struct {
		name, says string
		starts     int
		taken      bool
	}{
		{"port taken", "listen tcp 127.0.0.1:1: bind: address already in use", 3, true},
		{"another failure", "no such flag", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// A stand-in for "hlab serve" that counts its starts, says why
			// it fails and exits.
			self := filepath.Join(dir, "serve.sh")
			script := "#!/bin/sh\necho x >> " + filepath.Join(dir, "starts") + "\necho '" + tc.says + "'\nexit 1\n"
			if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			var startErr error
			exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
				_, startErr = r.StartServicePorts(ctx, "work", 0, 0, []string{"--grpc-addr"})
				return startErr
			}}
			lab.RunAll(context.Background(), []lab.Experiment{exp},
				lab.Options{Mode: lab.Quick, Short: true, WorkDir: dir, Self: self}, sb, nil)
			b, _ := os.ReadFile(filepath.Join(dir, "starts"))
			if starts := strings.Count(string(b), "x"); starts != tc.starts {
				t.Errorf("started %d times, want %d", starts, tc.starts)
			}
			if startErr == nil || errors.Is(startErr, deps.ErrPortTaken) != tc.taken {
				t.Errorf("err = %v: want one that wraps deps.ErrPortTaken: %v", startErr, tc.taken)
			}
		})
	}
}

// TestCleanupRunsLastFirstAfterAFailedRun: what an experiment registers
// with Run.Cleanup runs once its Run returned, also with an error, last
// registered first, and not before Run returned.
func TestCleanupRunsLastFirstAfterAFailedRun(t *testing.T) {
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var order []int
	exp := experiment{run: func(ctx context.Context, r *lab.Run) error {
		for i := range 3 {
			r.Cleanup(func() { order = append(order, i) })
		}
		if len(order) != 0 {
			t.Errorf("cleanups ran before Run returned: %v", order)
		}
		return errors.New("a phase failed")
	}}
	results := runAll(t, sb, exp)
	if results[0].Error == "" {
		t.Errorf("the experiment's error was lost")
	}
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Errorf("cleanups ran in order %v, want [2 1 0]", order)
	}
}
