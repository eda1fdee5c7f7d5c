package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
)

// NewStream returns the RNG stream of one subsystem: PCG seeded from
// SHA-256(seed, name), so drawing from one stream never shifts another.
func NewStream(seed uint64, name string) *rand.Rand {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(name))
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])))
}
