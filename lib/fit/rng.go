package fit

import "github.com/blis-sim/blis/lib/rng"

// Perm is a seeded permutation of 0..n-1 drawn from stream name.
func Perm(n int, seed uint64, name string) []int {
	return rng.New(seed, name).Perm(n)
}
