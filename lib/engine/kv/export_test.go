package kv

// HoldsKey reports whether some block of c holds key k, wherever in a
// chain it is (for tests that list what a cache holds; Lookup and Has
// follow chains from their first key).
func HoldsKey(c *Paged, k uint64) bool {
	for id := range c.b {
		if c.b[id].key == k && c.live(int32(id)) {
			return true
		}
	}
	return false
}

// PrivateBlocks is how many cached blocks c's free queue holds in private
// runs (a Unique handle's blocks, which have no records).
func PrivateBlocks(c *Paged) int32 { return c.nRun }
