package cluster

import (
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Lower KV tiers (docs/engine.md, "Tiered KV"): a replica's scheduler loads
// lower-tier hits asynchronously; an idle replica must be woken when a load
// ends. wakeAt (per replica, the wake-up queued) is nil without tiers.

// armWake schedules a wake-up for an idle replica whose KV loads from a
// lower tier are in progress: nothing else would start its next step.
func (c *Cluster) armWake(rep *replica.Replica) {
	if c.wakeAt == nil || rep.Busy() || rep.StartPending() {
		return
	}
	t := rep.Sched.WakeAt()
	if t == row.Null || t == c.wakeAt[rep.Index] {
		return
	}
	// A load that ended during the step just finished wakes it now.
	t = max(t, c.now)
	c.wakeAt[rep.Index] = t
	c.h.push(t, evWake, rep.Index, nil)
}

// wake handles an idle replica's load ending.
func (c *Cluster) wake(rep *replica.Replica) {
	if c.wakeAt[rep.Index] == c.now {
		c.wakeAt[rep.Index] = row.Null
	}
	rep.Sched.Wake(c.now)
	c.markDirty(rep.Index)
	c.kick(rep)
	c.armWake(rep)
}

// reportTiers puts replica i's lower KV tiers on board b at position j:
// per tier the blocks held, the capacity, and the offload and reload rates
// over the tier's last window (kv.Tier.Rates).
func (c *Cluster) reportTiers(b *policy.Board, j int, i int32) {
	ts := c.reps[i].Sched.Tiers()
	if ts == nil {
		return
	}
	buf := c.tierStat[:0]
	for _, t := range ts.T {
		off, rel := t.Rates(c.now)
		buf = append(buf, policy.TierStatus{Name: t.Spec.Name, Used: int64(t.Len()), Total: int64(t.Spec.Blocks), OffloadRate: off, ReloadRate: rel})
	}
	c.tierStat = buf
	b.SetTiers(j, buf)
}
