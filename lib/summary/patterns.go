package summary

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// Pattern mining (the pattern_mining strategy): which features of routing
// decisions recur among those with the worst outcomes far more than among
// all of them. A decision's features are what it saw and did (the chosen
// replica not the least loaded of those recorded, another holding more of
// the prompt's cache, a queue or a full KV on the target, no hit, a shadow
// misprediction, candidates filtered out) and who it was about (target,
// tenant, class, reason, hit tier). The worst are the decisions whose
// request did not complete or had the longest TTFT: the worst 10 % (at
// least 10). A pattern — one feature, or two together — is reported when
// it covers at least 10 % of the worst (and 3 of them) and is at least
// 1.5 times as frequent among them as among all decisions (its lift),
// ranked by the worst decisions it explains beyond chance:
// count × (1 − 1/lift). Deterministic: ties by name.

// mined is one routing decision, compactly.
type mined struct {
	seq   int64
	ttft  int64 // trace.Null: no first token
	done  bool  // completed
	feats uint16
	cats  [nCat]int32
}

// Decision features.
const (
	fNotLeast = iota
	fMoreCachedElsewhere
	fKVHigh
	fQueued
	fDeepQueue
	fNoHit
	fShadowMiss
	fFiltered
	nFeat
)

var featNames = [nFeat]string{
	"the chosen replica was not the least loaded of the candidates recorded",
	"another candidate held more of the prompt's cached blocks",
	"the chosen replica's KV was at least 90 % used",
	"the chosen replica had requests waiting",
	"the chosen replica had at least 8 requests waiting",
	"no cache hit although the prompt had prefix blocks",
	"the shadow KV mispredicted the cache hit",
	"the policy filtered candidates out",
}

// Categorical features.
const (
	cTarget = iota
	cTenant
	cClass
	cReason
	cTier
	nCat
)

var catNames = [nCat]string{"routed to %s", "tenant %s", "class %s", "reason %q", "hit tier %s"}

// miner collects routing decisions for pattern mining.
type miner struct {
	rows []mined
	dict [nCat]map[string]int32
	vals [nCat][]string
}

func newMiner() *miner {
	m := &miner{}
	for k := range m.dict {
		m.dict[k] = map[string]int32{}
	}
	return m
}

func (m *miner) id(k int, v string) int32 {
	if v == "" {
		return -1
	}
	i, ok := m.dict[k][v]
	if !ok {
		i = int32(len(m.vals[k]))
		m.dict[k][v] = i
		m.vals[k] = append(m.vals[k], v)
	}
	return i
}

// add records a routing decision: d (with its candidates, chosen first),
// its hit tier, prompt blocks, status and filtered count.
func (m *miner) add(d *Decision, tier, status string, promptBlocks int32, filtered int) {
	r := mined{seq: d.Seq, ttft: d.TTFTUS, done: status == trace.StatusCompleted}
	set := func(f int, on bool) {
		if on {
			r.feats |= 1 << f
		}
	}
	if len(d.Candidates) > 1 {
		c0 := d.Candidates[0]
		load := c0.Waiting + c0.Running + c0.InFlight
		for _, c := range d.Candidates[1:] {
			set(fNotLeast, c.Waiting+c.Running+c.InFlight < load)
			set(fMoreCachedElsewhere, c.CachedBlocks != trace.NullI32 && c0.CachedBlocks != trace.NullI32 && c.CachedBlocks > c0.CachedBlocks)
		}
	}
	set(fKVHigh, !math.IsNaN(d.KVUtil) && d.KVUtil >= 0.9)
	set(fQueued, d.Waiting != trace.NullI32 && d.Waiting > 0)
	set(fDeepQueue, d.Waiting != trace.NullI32 && d.Waiting >= 8)
	set(fNoHit, promptBlocks > 0 && d.CacheHit == 0)
	set(fShadowMiss, d.ExpectedHit != trace.NullI32 && d.CacheHit != trace.NullI32 && promptBlocks > 0 && d.ExpectedHit != d.CacheHit)
	set(fFiltered, filtered > 0)
	r.cats = [nCat]int32{m.id(cTarget, d.Target), m.id(cTenant, d.Tenant), m.id(cClass, d.Class), m.id(cReason, d.Reason), m.id(cTier, tier)}
	m.rows = append(m.rows, r)
}

// Pattern is a feature (or two) over-represented among the worst routing
// decisions.
type Pattern struct {
	Name         string
	Worst, All   int     // decisions with it: among the worst, among all
	WorstN, AllN int     // sizes of the two sets
	Lift         float64 // (Worst/WorstN) / (All/AllN)
	Examples     []int64 // seqs of worst decisions with it (at most 3)
	score        float64
	keys         []patKey
	sig          uint64 // the decisions it covers, hashed (to merge equal patterns)
}

type patKey struct {
	cat  int // -1: a feature
	val  int32
	feat int
}

func (k patKey) has(r *mined) bool {
	if k.cat < 0 {
		return r.feats&(1<<k.feat) != 0
	}
	return r.cats[k.cat] == k.val
}

func (m *miner) keyName(k patKey) string {
	if k.cat < 0 {
		return featNames[k.feat]
	}
	return fmt.Sprintf(catNames[k.cat], m.vals[k.cat][k.val])
}

// mine returns the patterns, best first, and the worst set's TTFT bound
// (trace.Null when every worst decision was incomplete) and size.
func (m *miner) mine(limit int) (pats []Pattern, worstN int, cut int64, incomplete int) {
	n := len(m.rows)
	if n < 20 {
		return nil, 0, trace.Null, 0
	}
	// The worst: incomplete first, then the longest TTFT, then seq.
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	bad := func(r *mined) (int, int64) {
		if !r.done || r.ttft == trace.Null {
			return 1, 0
		}
		return 0, r.ttft
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, rb := &m.rows[idx[a]], &m.rows[idx[b]]
		ia, ta := bad(ra)
		ib, tb := bad(rb)
		if ia != ib {
			return ia > ib
		}
		if ta != tb {
			return ta > tb
		}
		return ra.seq < rb.seq
	})
	worstN = max(10, (n+9)/10)
	worst := make([]bool, n)
	cut = trace.Null
	for _, i := range idx[:worstN] {
		worst[i] = true
		if r := &m.rows[i]; r.done && r.ttft != trace.Null {
			cut = r.ttft // the smallest TTFT among the worst, as they are sorted
		} else {
			incomplete++
		}
	}
	count := func(keys []patKey) (w, a int, ex []int64, sig uint64) {
		for _, i := range idx { // worst first: the examples are the worst
			r := &m.rows[i]
			ok := true
			for _, k := range keys {
				ok = ok && k.has(r)
			}
			if !ok {
				continue
			}
			a++
			x := uint64(i+1) * 0x9E3779B97F4A7C15
			sig += x ^ (x >> 29)
			if worst[i] {
				w++
				if len(ex) < 3 {
					ex = append(ex, r.seq)
				}
			}
		}
		return
	}
	minW := max(3, (worstN+9)/10)
	eval := func(keys []patKey) (Pattern, bool) {
		w, a, ex, sig := count(keys)
		if w < minW || a == 0 {
			return Pattern{}, false
		}
		lift := (float64(w) / float64(worstN)) / (float64(a) / float64(n))
		if lift < 1.5 {
			return Pattern{}, false
		}
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = m.keyName(k)
		}
		return Pattern{Name: strings.Join(names, ", and "), Worst: w, All: a, WorstN: worstN, AllN: n, Lift: lift, Examples: ex,
			score: float64(w) * (1 - 1/lift), keys: keys, sig: sig}, true
	}
	var singles []Pattern
	var keys []patKey
	for f := 0; f < nFeat; f++ {
		keys = append(keys, patKey{cat: -1, feat: f})
	}
	for c := 0; c < nCat; c++ {
		for v := range m.vals[c] {
			keys = append(keys, patKey{cat: c, val: int32(v)})
		}
	}
	for _, k := range keys {
		if p, ok := eval([]patKey{k}); ok {
			singles = append(singles, p)
		}
	}
	byScore := func(ps []Pattern) {
		sort.SliceStable(ps, func(a, b int) bool {
			if ps[a].score != ps[b].score {
				return ps[a].score > ps[b].score
			}
			return ps[a].Name < ps[b].Name
		})
	}
	byScore(singles)
	// Pairs of the strongest singles, when together they sharpen both.
	top := singles[:min(8, len(singles))]
	pats = append(pats, singles...)
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			p, ok := eval(append(append([]patKey(nil), top[i].keys...), top[j].keys...))
			if ok && p.Lift > 1.1*max(top[i].Lift, top[j].Lift) {
				pats = append(pats, p)
			}
		}
	}
	byScore(pats)
	// Patterns covering the same decisions are one (class batch and tenant
	// initech, when one tenant sends the class): merged under the first.
	k := 0
	for _, p := range pats {
		dup := -1
		for j := 0; j < k; j++ {
			if pats[j].sig == p.sig && pats[j].All == p.All && pats[j].Worst == p.Worst {
				dup = j
			}
		}
		if dup >= 0 {
			if len(p.keys) == 1 && len(pats[dup].keys) == 1 {
				pats[dup].Name += " (the same decisions as: " + p.Name + ")"
			}
			continue
		}
		pats[k] = p
		k++
	}
	pats = pats[:k]
	return pats[:min(limit, len(pats))], worstN, cut, incomplete
}
