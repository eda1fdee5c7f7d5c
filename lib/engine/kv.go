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
	b         []block
	head      int32
	tail      int32
	cached    map[uint64]int32
	evictions int64
}

// block is one KV block; one struct per block keeps a block's fields in one
// cache line.
type block struct {
	key    uint64
	prev   int32 // free-queue links, -1 at the ends
	next   int32
	refcnt int32
	hashed bool
}

func newKVCache(blocks int32, blockSize int32) *kvCache {
	c := &kvCache{
		blockSize: blockSize, total: blocks, free: blocks, b: make([]block, blocks),
		head: -1, tail: -1, cached: map[uint64]int32{},
	}
	for i := int32(0); i < blocks; i++ {
		c.b[i].prev, c.b[i].next = i-1, i+1
	}
	if blocks > 0 {
		c.b[blocks-1].next = -1
		c.head, c.tail = 0, blocks-1
	}
	return c
}

func (c *kvCache) used() int32 { return c.total - c.free }

func (c *kvCache) unlink(b int32) {
	p, n := c.b[b].prev, c.b[b].next
	if p >= 0 {
		c.b[p].next = n
	} else {
		c.head = n
	}
	if n >= 0 {
		c.b[n].prev = p
	} else {
		c.tail = p
	}
	c.b[b].prev, c.b[b].next = -1, -1
	c.free--
}

func (c *kvCache) pushTail(b int32) {
	c.b[b].prev, c.b[b].next = c.tail, -1
	if c.tail >= 0 {
		c.b[c.tail].next = b
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
		if c.b[b].hashed {
			if c.cached[c.b[b].key] == b {
				delete(c.cached, c.b[b].key)
			}
			c.b[b].hashed = false
			c.evictions++
		}
		c.b[b].refcnt = 1
		blocks = append(blocks, b)
	}
	return blocks
}

// release drops one reference to each block, last block first, so that a
// request's tail blocks (least likely to be shared) are evicted first.
func (c *kvCache) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		c.b[b].refcnt--
		if c.b[b].refcnt == 0 {
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
		if c.b[c.cached[keys[i]]].refcnt == 0 {
			k++
		}
	}
	return k
}

// touch takes a reference to the first n cached blocks of keys.
func (c *kvCache) touch(blocks []int32, keys []uint64, n int) []int32 {
	for i := 0; i < n; i++ {
		b := c.cached[keys[i]]
		if c.b[b].refcnt == 0 {
			c.unlink(b)
		}
		c.b[b].refcnt++
		blocks = append(blocks, b)
	}
	return blocks
}

// register records blocks[from:to] under keys[from:to] as cached. A key that
// is already cached in another block keeps its block, as in vLLM.
func (c *kvCache) register(blocks []int32, keys []uint64, from, to int) {
	for j := from; j < to; j++ {
		b := blocks[j]
		if c.b[b].hashed {
			continue
		}
		k := keys[j]
		if _, ok := c.cached[k]; ok {
			continue
		}
		c.cached[k] = b
		c.b[b].key = k
		c.b[b].hashed = true
	}
}

// check verifies block conservation: every block is either referenced or in
// the free queue, the counters agree, and the cache index points at hashed
// blocks.
func (c *kvCache) check() error {
	var inQueue int32
	for b := c.head; b >= 0; b = c.b[b].next {
		inQueue++
		if c.b[b].refcnt != 0 {
			return fmt.Errorf("KV block %d is in the free queue with %d references", b, c.b[b].refcnt)
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
		if c.b[b].refcnt < 0 {
			return fmt.Errorf("KV block %d has %d references", b, c.b[b].refcnt)
		}
		if c.b[b].refcnt > 0 {
			ref++
		}
	}
	if ref+c.free != c.total {
		return fmt.Errorf("KV blocks: %d referenced + %d free != %d total", ref, c.free, c.total)
	}
	for k, b := range c.cached {
		if !c.b[b].hashed || c.b[b].key != k {
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
