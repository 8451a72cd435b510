package deps

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestOnFreePorts(t *testing.T) {
	other := errors.New("other")
	for _, tc := range []struct {
		name  string
		errs  []error // what start returns, call by call
		calls int
		want  error
	}{
		{"first try", []error{nil}, 1, nil},
		{"taken then free", []error{fmt.Errorf("x: %w", ErrPortTaken), nil}, 2, nil},
		{"taken by the log's words", []error{errors.New("bind() failed (98: Address already in use)"), nil}, 2, nil},
		{"taken three times", []error{ErrPortTaken, ErrPortTaken, ErrPortTaken, nil}, 3, ErrPortTaken},
		{"another error is not retried", []error{other, nil}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := OnFreePorts(context.Background(), 3, func(ports []int) error {
				if len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
					t.Errorf("ports %v: want 3 distinct", ports)
				}
				calls++
				return tc.errs[calls-1]
			})
			if calls != tc.calls || !errors.Is(err, tc.want) {
				t.Errorf("calls %d, err %v; want %d, %v", calls, err, tc.calls, tc.want)
			}
		})
	}
}
