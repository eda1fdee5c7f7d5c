// Package rng derives the independent random streams BLIS uses: one per
// subsystem or purpose, each a PCG seeded from SHA-256(master seed, name), so
// drawing from one stream never shifts another and adding a stream leaves the
// others unchanged.
package rng

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
)

// PCG returns the source of stream name under the master seed.
func PCG(seed uint64, name string) *rand.PCG {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h := sha256.New()
	h.Write(b[:])
	h.Write([]byte(name))
	sum := h.Sum(nil)
	return rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16]))
}

// New returns stream name under the master seed.
func New(seed uint64, name string) *rand.Rand { return rand.New(PCG(seed, name)) }

// Mix64 is SplitMix64's finaliser: a fast bijective scramble of 64 bits,
// used to derive hash keys (prefix blocks, cache slots) deterministically.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
