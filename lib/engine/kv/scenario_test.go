package kv_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/internal/scenario"
	"github.com/blis-sim/blis/lib/engine/kv"
)

// TestScenarios runs testdata/*.txt: one replica's paged KV store, and its
// lower tiers, driven through the Store interface (docs/engine.md,
// "Scenario tests"). Every cache and evict event the store reports is
// logged; block conservation (and tier conservation) is checked after
// every command. Commands:
//
//	config blocks=N block=T [offload=lazy|eager|threshold threshold=F block_bytes=B] [observe=false] [private=true]
//	                         a fresh store (observed by the harness unless
//	                         observe=false; SetPrivate); input lines add lower tiers, top
//	                         down: <name> blocks=N bytes_us=B latency=µs eviction=lru|lfu|priority
//	alloc h=<handle> n=N [ids=K] [unique=true]   N blocks from the free queue's head, the
//	                         first K identified (a new handle: Unique, its
//	                         request's first key no other's)
//	expose h=<handle> keys=(k...)   make a Unique handle's blocks ordinary (before a preemption)
//	register h=<handle> keys=(k...) [from=i]   make the handle's blocks i.. findable under keys
//	release h=<handle>             free every block, last first
//	touch h=<handle> keys=(k...)   take the cached leading blocks of keys
//	lookup keys=(k...)             leading keys cached, and what taking them costs
//	load keys=(k...) at=µs         load lower-tier blocks to the GPU: when they arrive
//	print                          counts, handles, and where every key seen is
func TestScenarios(t *testing.T) {
	scenario.Run(t, func() scenario.Harness { return (&harness{}).do })
}

type harness struct {
	c       *kv.Paged
	ts      *kv.Tiers
	handles map[string]*kv.Handle
	keys    []uint64 // every key seen, in order
	seen    map[uint64]bool
	events  []string
}

// Cached and Evicted make the harness the store's observer.
func (h *harness) Cached(k uint64)  { h.events = append(h.events, fmt.Sprintf("cached %d", k)) }
func (h *harness) Evicted(k uint64) { h.events = append(h.events, fmt.Sprintf("evicted %d", k)) }

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	a := scenario.Of(t, td)
	var log scenario.Log
	if td.Cmd != "config" && h.c == nil {
		a.Fatalf("%s before config", td.Cmd)
	}
	h.events = h.events[:0]
	var offBefore []int64
	if h.ts != nil {
		for _, tr := range h.ts.T {
			offBefore = append(offBefore, tr.Stats.Offloads, tr.Stats.Evictions)
		}
	}
	switch td.Cmd {
	case "config":
		h.config(t, td, a, &log)
	case "alloc":
		name, hd := h.handle(a, true)
		n := int32(a.Int("n", 1))
		ids := int32(a.Int("ids", 0))
		if a.Bool("unique", false) {
			hd.Unique = true
		}
		a.Done()
		if ids > n {
			a.Fatalf("ids=%d > n=%d", ids, n)
		}
		if h.c.Free() < n {
			log.Printf("no room: %d free, %d asked (the scheduler preempts or waits)", h.c.Free(), n)
			break
		}
		h.c.Alloc(hd, n, ids)
		log.Printf("%s: %s; %s", name, describe(hd), h.counts())
	case "register":
		name, hd := h.handle(a, false)
		keys := h.keyArg(a, "keys")
		from := int(a.Int("from", 0))
		a.Done()
		if len(keys) > len(hd.IDs) || from > len(keys) {
			a.Fatalf("%s holds %d identified blocks, %d keys given", name, len(hd.IDs), len(keys))
		}
		h.c.Register(hd, keys, from, len(keys))
		log.Printf("%s registered keys %d..%d", name, from, len(keys)-1)
	case "expose":
		name, hd := h.handle(a, false)
		keys := h.keyArg(a, "keys")
		a.Done()
		h.c.Expose(hd, keys)
		log.Printf("%s exposed: %s", name, describe(hd))
	case "release":
		name, hd := h.handle(a, false)
		a.Done()
		h.c.Release(hd)
		log.Printf("%s released; %s", name, h.counts())
	case "touch":
		name, hd := h.handle(a, true)
		keys := h.keyArg(a, "keys")
		a.Done()
		n := h.c.Lookup(keys, len(keys))
		cost := h.c.HitCost(keys, n)
		h.c.Touch(hd, keys, n)
		log.Printf("%s took %d cached blocks (%d from the free queue): %s; %s", name, n, cost, describe(hd), h.counts())
	case "lookup":
		keys := h.keyArg(a, "keys")
		a.Done()
		n := h.c.Lookup(keys, len(keys))
		log.Printf("%d of %d keys cached; taking them removes %s from the free queue", n, len(keys), scenario.Plural(int64(h.c.HitCost(keys, n)), "block"))
		if h.ts != nil {
			log.Printf("then %d more in lower tiers", h.ts.Lookup(keys, n, len(keys)))
		}
	case "load":
		keys := h.keyArg(a, "keys")
		at := a.Int("at", 0)
		a.Done()
		if h.ts == nil {
			a.Fatalf("load: no lower tiers")
		}
		if n := h.ts.Lookup(keys, 0, len(keys)); n != len(keys) {
			a.Fatalf("load: only %d of the %d keys are in lower tiers", n, len(keys))
		}
		per := make([]int32, len(h.ts.T))
		ready, thrash := h.ts.Load(keys, at, per)
		var parts []string
		for i, n := range per {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%d from %s", n, h.ts.T[i].Spec.Name))
			}
		}
		log.Printf("load at %d: %s; ready at %d (%d µs); %d thrashing", at, strings.Join(parts, ", "), ready, ready-at, thrash)
	case "print":
		a.Done()
		h.print(&log)
	default:
		a.Fatalf("unknown command %q", td.Cmd)
	}
	for _, e := range h.events {
		log.Printf("  %s", e)
	}
	if h.ts != nil && offBefore != nil {
		for i, tr := range h.ts.T {
			if d := tr.Stats.Offloads - offBefore[2*i]; d > 0 {
				log.Printf("  %s tier took %s", tr.Spec.Name, scenario.Plural(d, "block"))
			}
			if d := tr.Stats.Evictions - offBefore[2*i+1]; d > 0 {
				log.Printf("  %s tier evicted %s", tr.Spec.Name, scenario.Plural(d, "block"))
			}
		}
	}
	if err := h.c.Check(); err != nil {
		t.Fatalf("%s: invariant violated: %v", td.Pos, err)
	}
	if h.ts != nil {
		if err := h.ts.Check(); err != nil {
			t.Fatalf("%s: invariant violated: %v", td.Pos, err)
		}
	}
	return log.String()
}

func (h *harness) config(t *testing.T, td *datadriven.TestData, a *scenario.Args, log *scenario.Log) {
	blocks, block := int32(a.Int("blocks", 8)), int32(a.Int("block", 16))
	offload := a.Str("offload", "lazy")
	threshold := a.Float("threshold", 0.8)
	blockBytes := a.Float("block_bytes", 1000)
	observe := a.Bool("observe", true)
	private := a.Bool("private", false)
	a.Done()
	h.c = kv.NewPaged(blocks, block)
	h.c.SetPrivate(private)
	if observe {
		h.c.SetObserver(h)
	}
	h.handles, h.keys, h.seen, h.ts = map[string]*kv.Handle{}, nil, map[uint64]bool{}, nil
	log.Printf("%d blocks of %d tokens", blocks, block)
	var specs []kv.TierSpec
	for _, l := range scenario.Lines(t, td) {
		s := kv.TierSpec{Name: l.Name, Blocks: int32(l.Int("blocks", 1)), BytesUS: l.Float("bytes_us", 1000),
			LatencyUS: l.Int("latency", 0)}
		switch ev := l.Str("eviction", "lru"); ev {
		case "lru":
			s.Eviction = kv.EvictLRU
		case "lfu":
			s.Eviction = kv.EvictLFU
		case "priority":
			s.Eviction = kv.EvictPriority
		default:
			l.Fatalf("eviction: expected lru, lfu or priority, found %q", ev)
		}
		l.Done()
		specs = append(specs, s)
		log.Printf("tier %s: %d blocks, %g B/µs, %d µs per transfer", s.Name, s.Blocks, s.BytesUS, s.LatencyUS)
	}
	if specs == nil {
		return
	}
	pol := map[string]uint8{"lazy": kv.OffloadLazy, "eager": kv.OffloadEager, "threshold": kv.OffloadThreshold}
	p, ok := pol[offload]
	if !ok {
		a.Fatalf("offload: expected lazy, eager or threshold, found %q", offload)
	}
	h.ts = kv.NewTiers(specs, p, threshold, blockBytes, h.c)
	h.c.SetLower(h.ts)
	log.Printf("offload %s; %g bytes per block", offload, blockBytes)
}

// handle is the handle h= names; create allows a new one.
func (h *harness) handle(a *scenario.Args, create bool) (string, *kv.Handle) {
	name := a.Str("h", "")
	if name == "" {
		a.Fatalf("h=<handle> is required")
	}
	hd := h.handles[name]
	if hd == nil {
		if !create {
			a.Fatalf("no handle %s", name)
		}
		hd = &kv.Handle{}
		h.handles[name] = hd
	}
	return name, hd
}

func (h *harness) keyArg(a *scenario.Args, key string) []uint64 {
	keys := a.Keys(key)
	if keys == nil {
		a.Fatalf("%s=(k1, k2, ...) is required", key)
	}
	for _, k := range keys {
		if !h.seen[k] {
			h.seen[k] = true
			h.keys = append(h.keys, k)
		}
	}
	return keys
}

func (h *harness) counts() string {
	return fmt.Sprintf("%d used, %d free of %d", h.c.Used(), h.c.Free(), h.c.Total())
}

func describe(hd *kv.Handle) string {
	if hd.Unique {
		return fmt.Sprintf("blocks %v + %d anonymous (unique)", hd.IDs, hd.Anon)
	}
	return fmt.Sprintf("blocks %v + %d anonymous", hd.IDs, hd.Anon)
}

func (h *harness) print(log *scenario.Log) {
	log.Printf("%s; %d evictions", h.counts(), h.c.Evictions())
	names := make([]string, 0, len(h.handles))
	for n := range h.handles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		log.Printf("%s: %s", n, describe(h.handles[n]))
	}
	var gpu, none []string
	tiers := map[string][]string{}
	for _, k := range h.keys {
		ks := fmt.Sprint(k)
		found := kv.HoldsKey(h.c, k)
		if found {
			gpu = append(gpu, ks)
		}
		if h.ts != nil {
			for _, tr := range h.ts.T {
				if tr.Has(k) {
					tiers[tr.Spec.Name] = append(tiers[tr.Spec.Name], ks)
					found = true
				}
			}
		}
		if !found {
			none = append(none, ks)
		}
	}
	log.Printf("cached on the GPU: %s", list(gpu))
	if h.ts != nil {
		for _, tr := range h.ts.T {
			log.Printf("in %s (%d/%d): %s", tr.Spec.Name, tr.Len(), tr.Spec.Blocks, list(tiers[tr.Spec.Name]))
		}
	}
	log.Printf("nowhere: %s", list(none))
	if n := kv.PrivateBlocks(h.c); n > 0 {
		log.Printf("in private runs (no records: found only by a lookup of their prompt): %s", scenario.Plural(int64(n), "block"))
	}
	if k, ok := h.c.Clash(); ok {
		log.Printf("clash: key %d is a unique request's and another's", k)
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}
