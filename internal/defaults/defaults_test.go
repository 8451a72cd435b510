package defaults_test

import (
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/defaults"
)

func TestPositive(t *testing.T) {
	for _, tc := range []struct{ v, want time.Duration }{{0, time.Second}, {-5, time.Second}, {3, 3}} {
		v := tc.v
		defaults.Positive(&v, time.Second)
		if v != tc.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", tc.v, v, tc.want)
		}
	}
	n := int32(7)
	defaults.Positive(&n, 16)
	if n != 7 {
		t.Errorf("a set count changed to %d", n)
	}
}
