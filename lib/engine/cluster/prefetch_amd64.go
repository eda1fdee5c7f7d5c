package cluster

import "unsafe"

// prefetch asks the CPU to bring p's cache line in (PREFETCHT0): a hint
// that changes nothing but when a later read finds the line. Go has no
// prefetch statement.
//
//go:noescape
func prefetch(p unsafe.Pointer)

// prefetchRanges asks for every cache line of each range (of n > 0
// bytes) of r.
//
//go:noescape
func prefetchRanges(r []prange)
