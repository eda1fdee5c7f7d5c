package engine

import "fmt"

// kvCache is one replica's paged KV cache with prefix caching, after vLLM
// v1's block pool: blocks whose reference count drops to zero go to the tail
// of a free queue but keep their hash, so a later request with the same
// prefix can take them back; allocation takes from the head (least recently
// freed), evicting the hash it held.
type kvCache struct {
	blockSize int32
	total     int32
	free      int32 // blocks in the free queue (cached or not)
	refcnt    []int32
	key       []uint64
	hashed    []bool
	prev      []int32 // free-queue links, -1 at the ends
	next      []int32
	head      int32
	tail      int32
	cached    map[uint64]int32
	evictions int64
}

func newKVCache(blocks int32, blockSize int32) *kvCache {
	c := &kvCache{
		blockSize: blockSize, total: blocks, free: blocks,
		refcnt: make([]int32, blocks), key: make([]uint64, blocks), hashed: make([]bool, blocks),
		prev: make([]int32, blocks), next: make([]int32, blocks),
		head: -1, tail: -1, cached: map[uint64]int32{},
	}
	for b := int32(0); b < blocks; b++ {
		c.prev[b] = b - 1
		c.next[b] = b + 1
	}
	if blocks > 0 {
		c.next[blocks-1] = -1
		c.head, c.tail = 0, blocks-1
	}
	return c
}

func (c *kvCache) used() int32 { return c.total - c.free }

func (c *kvCache) unlink(b int32) {
	p, n := c.prev[b], c.next[b]
	if p >= 0 {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n >= 0 {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.prev[b], c.next[b] = -1, -1
	c.free--
}

func (c *kvCache) pushTail(b int32) {
	c.prev[b], c.next[b] = c.tail, -1
	if c.tail >= 0 {
		c.next[c.tail] = b
	} else {
		c.head = b
	}
	c.tail = b
	c.free++
}

// alloc appends n fresh blocks to blocks; the caller has checked c.free >= n.
func (c *kvCache) alloc(blocks []int32, n int32) []int32 {
	for i := int32(0); i < n; i++ {
		b := c.head
		c.unlink(b)
		if c.hashed[b] {
			if c.cached[c.key[b]] == b {
				delete(c.cached, c.key[b])
			}
			c.hashed[b] = false
			c.evictions++
		}
		c.refcnt[b] = 1
		blocks = append(blocks, b)
	}
	return blocks
}

// release drops one reference to each block, last block first, so that a
// request's tail blocks (least likely to be shared) are evicted first.
func (c *kvCache) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		c.refcnt[b]--
		if c.refcnt[b] == 0 {
			c.pushTail(b)
		}
	}
}

// lookup returns how many leading keys are cached, at most max.
func (c *kvCache) lookup(keys []uint64, max int) int {
	if len(keys) < max {
		max = len(keys)
	}
	for i := 0; i < max; i++ {
		if _, ok := c.cached[keys[i]]; !ok {
			return i
		}
	}
	return max
}

// hitCost is the number of free-queue blocks that taking the first n cached
// blocks of keys would remove from the free queue.
func (c *kvCache) hitCost(keys []uint64, n int) int32 {
	var k int32
	for i := 0; i < n; i++ {
		if c.refcnt[c.cached[keys[i]]] == 0 {
			k++
		}
	}
	return k
}

// touch takes a reference to the first n cached blocks of keys.
func (c *kvCache) touch(blocks []int32, keys []uint64, n int) []int32 {
	for i := 0; i < n; i++ {
		b := c.cached[keys[i]]
		if c.refcnt[b] == 0 {
			c.unlink(b)
		}
		c.refcnt[b]++
		blocks = append(blocks, b)
	}
	return blocks
}

// register records blocks[from:to] under keys[from:to] as cached. A key that
// is already cached in another block keeps its block, as in vLLM.
func (c *kvCache) register(blocks []int32, keys []uint64, from, to int) {
	for j := from; j < to; j++ {
		b := blocks[j]
		if c.hashed[b] {
			continue
		}
		k := keys[j]
		if _, ok := c.cached[k]; ok {
			continue
		}
		c.cached[k] = b
		c.key[b] = k
		c.hashed[b] = true
	}
}

// check verifies block conservation: every block is either referenced or in
// the free queue, the counters agree, and the cache index points at hashed
// blocks.
func (c *kvCache) check() error {
	var inQueue int32
	for b := c.head; b >= 0; b = c.next[b] {
		inQueue++
		if c.refcnt[b] != 0 {
			return fmt.Errorf("KV block %d is in the free queue with %d references", b, c.refcnt[b])
		}
		if inQueue > c.total {
			return fmt.Errorf("KV free queue has a cycle")
		}
	}
	if inQueue != c.free {
		return fmt.Errorf("KV free queue holds %d blocks, counter says %d", inQueue, c.free)
	}
	var ref int32
	for b := int32(0); b < c.total; b++ {
		if c.refcnt[b] < 0 {
			return fmt.Errorf("KV block %d has %d references", b, c.refcnt[b])
		}
		if c.refcnt[b] > 0 {
			ref++
		}
	}
	if ref+c.free != c.total {
		return fmt.Errorf("KV blocks: %d referenced + %d free != %d total", ref, c.free, c.total)
	}
	for k, b := range c.cached {
		if !c.hashed[b] || c.key[b] != k {
			return fmt.Errorf("KV cache index maps a key to block %d, which holds another key", b)
		}
	}
	return nil
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// engineKeys derives one cache key per full engine block of the prompt from
// prefix_hashes given at another block size (prefix tokens per hash). Engine
// block j (tokens [jB, (j+1)B)) is keyed by the hash of the source block that
// holds its last token and by how far into that source block it ends: the
// source hashes are prefix-chained, so equal keys mean equal prefixes. Blocks
// beyond the hashed tokens get no key (never shared).
func engineKeys(dst []uint64, hashes []uint64, inputTokens int32, prefix, block int32) []uint64 {
	dst = dst[:0]
	if len(hashes) == 0 {
		return dst
	}
	covered := int64(len(hashes)) * int64(prefix)
	if int64(inputTokens) < covered {
		covered = int64(inputTokens)
	}
	nb := covered / int64(block)
	for j := int64(0); j < nb; j++ {
		end := (j + 1) * int64(block)
		i := (end - 1) / int64(prefix)
		k := end - i*int64(prefix)
		dst = append(dst, mix64(hashes[i]^uint64(k)*0x9E3779B97F4A7C15))
	}
	return dst
}
