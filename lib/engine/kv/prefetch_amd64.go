package kv

// prefetchHomes asks the processor to bring into its cache the home slot
// (blockIndex.home) of each key in an index of n slots starting at slots,
// without waiting for them: PREFETCHT0, which Go has no statement for.
// Admission warms the slots its prompt's blocks will be indexed in at the
// end of the prefill step, so that each miss overlaps the work between
// (prefetch_amd64.s).
//
//go:noescape
func prefetchHomes(slots *uint32, n uint64, keys []uint64)

// prefetchQueued asks for the records (16 bytes each, at b) of the blocks
// free-queue entries q name, without waiting for them.
//
//go:noescape
func prefetchQueued(b *block, q []qent)
