package fit

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
)

// NewRand returns the PCG stream for one purpose, seeded from
// SHA-256(master seed, name), so that drawing for one purpose never shifts
// another.
func NewRand(seed uint64, name string) *rand.Rand {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(name))
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// Perm is a seeded permutation of 0..n-1.
func Perm(n int, seed uint64, name string) []int {
	return NewRand(seed, name).Perm(n)
}
