package cluster

import (
	"math"

	"github.com/blis-sim/blis/lib/engine/replica"
)

// Leaping (docs/engine.md, "Leaping"): a replica whose next steps are
// determined runs them as one span with one event, at the end of the
// last (replica.Leap). What happens between that span's steps is applied
// when someone looks — the router, the autoscaler's samples, a snapshot,
// a fork, the end of the run — or when something changes the replica, in
// which case the span is cut: both as of the event being processed, so
// that the state seen is the one stepping one step at a time would show
// at that point of that instant (the keys of events.go order a span's
// step ends and step starts among the real events of an instant).

// leapSet is the replicas in a span.
type leapSet struct {
	ids []int32
	pos []int32 // by replica: position in ids, −1 when not leaping
}

func (s *leapSet) add(i int32) {
	s.pos[i] = int32(len(s.ids))
	s.ids = append(s.ids, i)
}

func (s *leapSet) remove(i int32) {
	p := s.pos[i]
	last := s.ids[len(s.ids)-1]
	s.ids[p] = last
	s.pos[last] = p
	s.ids = s.ids[:len(s.ids)-1]
	s.pos[i] = -1
}

// initLeap gives every replica its pool's ramps, and holds those
// whose steps must be taken one at a time: steps rows (each step's own
// row), prefill replicas (their steps are prefills), lower KV tiers whose
// rates a policy may read, speculative decoding (tokens per step not one),
// LoRA adapters.
func (c *Cluster) initLeap() {
	if c.opts.NoLeap {
		return
	}
	c.leap.pos = make([]int32, len(c.reps))
	for i := range c.leap.pos {
		c.leap.pos[i] = -1
	}
	for _, d := range c.deps {
		for pi := range d.pools {
			// Each pool its own ramps: a pool may run on hardware of its own.
			p := &d.pools[pi]
			p.ramps = replica.NewRamps(p.stepModel)
			for m := p.first; m < p.first+p.n; m++ {
				c.reps[m].Ramps = p.ramps
			}
		}
		for _, m := range d.Replicas {
			rep := c.reps[m]
			if rep.WantSteps {
				rep.HoldLeap(replica.HoldSteps)
			}
			if rep.Role == replica.Prefill {
				rep.HoldLeap(replica.HoldPrefill)
			}
			if c.opts.Policies.ReadsTiers && rep.Sched.Tiers() != nil {
				rep.HoldLeap(replica.HoldTierRates)
			}
			if d.spec {
				rep.HoldLeap(replica.HoldSpeculative)
			}
			if d.lora != nil {
				rep.HoldLeap(replica.HoldLoRA)
			}
		}
	}
	c.bindLeap()
}

// bindLeap makes the callbacks CatchUp asks about the instant it stops
// at (once per cluster: a clone binds its own).
func (c *Cluster) bindLeap() {
	c.endedFn = func(dur int64) bool { return stepEndKey(dur, c.syncInst) < c.syncKey }
	c.formedFn = func(prev int64) bool { return chainStartKey(prev, c.syncInst) < c.syncKey }
}

// syncAt applies rep's span up to position (t, key): the steps whose end
// or start events come before an event of that key at t.
func (c *Cluster) syncAt(rep *replica.Replica, t int64, key uint64) {
	c.syncInst, c.syncKey = rep.Index, key
	rep.CatchUp(t, c.endedFn, c.formedFn)
}

// sync applies rep's span up to the event being processed, before
// something reads the replica.
func (c *Cluster) sync(rep *replica.Replica) {
	if rep.Leaping() {
		c.syncAt(rep, c.now, c.at)
	}
}

// cut ends rep's span as of the event being processed, before something
// changes the replica: its executing step ends as scheduled then, or, when
// one just ended, its next one starts after this event.
func (c *Cluster) cut(rep *replica.Replica) {
	if !rep.Leaping() {
		return
	}
	c.syncAt(rep, c.now, c.at)
	c.leap.remove(rep.Index)
	executing, end, dur, prev := rep.Cut()
	if executing {
		c.h.pushStepEnd(end, dur, rep.Index) // moves the span's end
	} else {
		c.h.ends.remove(rep.Index)
		c.h.pushChainStart(c.now, prev, rep.Index)
	}
	c.markDirty(rep.Index)
}

// shorten ends rep's span extra steps after the one executing, or cuts it
// when none is (a step just ended): a request enqueued on an async
// scheduler changes no step before the next but one.
func (c *Cluster) shorten(rep *replica.Replica, extra int64) {
	c.syncAt(rep, c.now, c.at)
	end, last, moved := rep.Shorten(extra)
	if moved {
		c.h.pushStepEnd(end, last, rep.Index)
	} else if !rep.Executing() {
		c.cut(rep)
	}
}

// syncAll applies every span up to position (t, key) and returns the end
// of the last step applied at or before t (math.MinInt64: none).
func (c *Cluster) syncAll(t int64, key uint64) int64 {
	last := int64(math.MinInt64)
	for _, i := range c.leap.ids {
		rep := c.reps[i]
		c.syncAt(rep, t, key)
		if e, ok := rep.LastLeapEnd(); ok && e <= t {
			last = max(last, e)
		}
	}
	return last
}

// settle brings the spans up to t after every event at or before t has
// been processed (RunUntil's Idle): the clock reads the last step end
// processed, as it would stepping one step at a time.
func (c *Cluster) settle(t int64) {
	if len(c.leap.ids) == 0 || c.err != nil {
		return
	}
	c.at = math.MaxUint64
	if last := c.syncAll(t, math.MaxUint64); last > c.now {
		c.now = last
	}
}

// leapEventNow reports whether a replica in a span has a step end or
// start at this instant after the event being processed: stepping one
// step at a time, it would be queued, and a replica kicked now would
// queue its start rather than start at once (kickAfter) — which the
// gateway's dispatch after the event can see (saturation with the
// replica's step formed or not). Asked only while requests wait at the
// gateway.
func (c *Cluster) leapEventNow() bool {
	for _, i := range c.leap.ids {
		rep := c.reps[i]
		c.syncAt(rep, c.now, c.at)
		if rep.NextLeapEvent() == c.now {
			return true
		}
	}
	return false
}

// nextLeapEvent is the earliest step end or start in a span not applied
// yet (math.MaxInt64: none), for a real-time driver's next wake-up.
func (c *Cluster) nextLeapEvent() int64 {
	t := int64(math.MaxInt64)
	for _, i := range c.leap.ids {
		t = min(t, c.reps[i].NextLeapEvent())
	}
	return t
}

// watchBoard makes g's board ask for the status of a replica in a span
// when a policy reads it.
func (c *Cluster) watchBoard(g *group) {
	g.board.OnRead(func(p int) { c.readBoard(g, p) })
}
