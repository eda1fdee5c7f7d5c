package decision

// shadowLRU is the router's own model of one replica's prefix cache, as an
// approximate prefix-aware router keeps it (llm-d's approximate prefix
// scorer, vLLM production-stack's router): the prompt blocks of every
// request it routed there, least recently routed evicted first once the
// replica's KV capacity (from its status report) is full. It never looks
// at the replica's cache itself: where it and the cache disagree is the
// shadow_divergence anomaly.
type shadowLRU struct {
	cap        int
	idx        map[uint64]int32
	key        []uint64
	prev, next []int32
	head, tail int32 // head = most recent
}

func newShadow(capacity int) *shadowLRU {
	return &shadowLRU{cap: max(capacity, 1), idx: map[uint64]int32{}, head: -1, tail: -1}
}

func (r *Recorder) shadowOf(rep int32, kvTotal int64) *shadowLRU {
	s := r.shadow[rep]
	if s == nil {
		s = newShadow(int(kvTotal))
		r.shadow[rep] = s
	}
	if kvTotal > 0 && int(kvTotal) != s.cap {
		s.cap = int(kvTotal) // a snapshot reported another capacity
	}
	return s
}

// lead is the number of leading keys the model believes cached.
func (s *shadowLRU) lead(keys []uint64) int {
	for i, k := range keys {
		if _, ok := s.idx[k]; !ok {
			return i
		}
	}
	return len(keys)
}

func (s *shadowLRU) unlink(i int32) {
	p, n := s.prev[i], s.next[i]
	if p >= 0 {
		s.next[p] = n
	} else {
		s.head = n
	}
	if n >= 0 {
		s.prev[n] = p
	} else {
		s.tail = p
	}
}

func (s *shadowLRU) pushFront(i int32) {
	s.prev[i], s.next[i] = -1, s.head
	if s.head >= 0 {
		s.prev[s.head] = i
	}
	s.head = i
	if s.tail < 0 {
		s.tail = i
	}
}

// insert marks keys as most recently used, the first most recent of all,
// so that a prompt's tail is evicted before its head (as in vLLM).
func (s *shadowLRU) insert(keys []uint64) {
	for j := len(keys) - 1; j >= 0; j-- {
		k := keys[j]
		if i, ok := s.idx[k]; ok {
			s.unlink(i)
			s.pushFront(i)
			continue
		}
		var i int32
		if len(s.idx) >= s.cap {
			i = s.tail
			s.unlink(i)
			delete(s.idx, s.key[i])
		} else {
			i = int32(len(s.key))
			s.key = append(s.key, 0)
			s.prev = append(s.prev, -1)
			s.next = append(s.next, -1)
		}
		s.key[i] = k
		s.idx[k] = i
		s.pushFront(i)
	}
}
