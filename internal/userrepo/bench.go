package userrepo

import (
	"context"
	"math/rand/v2"
	"testing"
)

// Keys returns n random user ids in 1..users (n a power of two, so a
// benchmark picks one with a mask), the same for the same seed.
func Keys(n, users int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = 1 + r.Int64N(int64(users))
	}
	return keys
}

// GetBench is the benchmark of report B's user repository: Get by random
// id from keys (len a power of two), on one goroutine, allocations
// reported. It is shared by this package's BenchmarkGet and the lab
// (replicaexp runs it through testing.Benchmark), so both measure the
// same loop.
func GetBench(ctx context.Context, repo Repo, keys []int64) func(b *testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if _, err := repo.Get(ctx, keys[n&(len(keys)-1)]); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
}
