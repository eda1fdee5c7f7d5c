//go:build !amd64

package kv

// prefetchHomes is a hint with no portable Go form: elsewhere than amd64
// it does nothing (prefetch_amd64.s).
func prefetchHomes(slots *uint32, n uint64, keys []uint64) {}

func prefetchQueued(b *block, q []qent) {}
