package cluster

import (
	"errors"
	"fmt"

	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Finish ends the run at the horizon (or when no event is left): requests
// still in flight are written as unfinished with what they reached, the
// summary is completed, and the final invariants are checked. Rows never
// read should be written with WriteUnread before.
func (c *Cluster) Finish() (Summary, error) {
	for _, rep := range c.reps {
		// First: a broken promise can make the run fail otherwise too
		// (an invariant), and is the cause to name.
		if err := c.clashErr(rep); err != nil {
			return c.sum, err
		}
	}
	if c.err != nil {
		return c.sum, c.err
	}
	if len(c.leap.ids) > 0 {
		c.syncAll(c.now, c.at) // spans up to the last event processed
	}
	c.sum.SimEndUS = c.now
	if c.sc != nil {
		c.sc.finishHeld()
	}
	if c.fc != nil {
		c.fc.finish()
	}
	// With no event left, nothing can still be waiting: a request left
	// here would be a silent stall, not a horizon cut.
	if c.h.Len() == 0 && !c.hasStash && c.liveH != nil {
		return c.sum, fmt.Errorf("%w: request %s in phase %d at %d µs", errStall, c.liveH.Req.ID, c.liveH.Phase, c.now)
	}
	if c.hasStash {
		// The caller stopped at a root's arrival: it is past the horizon.
		c.hasStash = false
	}
	c.clientClose()
	for r := c.liveH; r != nil; {
		next := r.LNext
		r.Status = row.StatusUnfinished
		if r.Phase == request.Running || r.Phase == request.Waiting {
			// Decode progress is implicit (see sched.VLLM): count the
			// tokens of the steps completed before the horizon.
			r.Generated = c.reps[r.Replica].Sched.Progress(r)
		}
		switch r.Phase {
		case request.Pending:
			r.Reason = "dependencies unfinished at horizon"
		case request.Arriving:
			if r.Req.ArrivalUS != row.Null && r.Req.ArrivalUS > c.horizon {
				r.Reason = "arrives after horizon"
			} else if r.ClientQueued {
				r.Reason = c.clientReason(r)
			}
		}
		c.terminal(r)
		r = next
	}
	if c.err != nil {
		return c.sum, c.err
	}
	c.sum.BusyUS = c.sum.BusyUS[:0]
	c.sum.Steps, c.sum.Preemptions, c.sum.Evictions, c.sum.LoRALoads = 0, 0, 0, 0
	c.sum.TierOffloads, c.sum.TierLoads, c.sum.ThrashLoads = nil, nil, 0
	if n := len(c.tierNames); n > 0 {
		c.sum.TierOffloads, c.sum.TierLoads = make([]int64, n), make([]int64, n)
		if c.sc != nil && c.sc.tierOff != nil {
			copy(c.sum.TierOffloads, c.sc.tierOff)
			copy(c.sum.TierLoads, c.sc.tierLoad)
		}
	}
	if c.sc != nil {
		c.sum.ThrashLoads = c.sc.thrash
	}
	for _, rep := range c.reps {
		c.sum.Steps += rep.Steps
		c.sum.Preemptions += rep.Sched.Preemptions()
		c.sum.Evictions += rep.Sched.KV().Evictions()
		if l, ok := rep.Sched.(interface{ LoRALoads() int64 }); ok {
			c.sum.LoRALoads += l.LoRALoads()
		}
		c.sum.BusyUS = append(c.sum.BusyUS, rep.BusyUS)
		if c.checks {
			if err := rep.Sched.KV().Check(); err != nil {
				return c.sum, fmt.Errorf("invariant violated: replica %s: %w", rep.ID, err)
			}
		}
		if ts := rep.Sched.Tiers(); ts != nil {
			cols := c.deps[rep.Deployment].tierCol
			for i, t := range ts.T {
				c.sum.TierOffloads[cols[i]] += t.Stats.Offloads
				c.sum.TierLoads[cols[i]] += t.Stats.Loads
				c.sum.ThrashLoads += t.Stats.ThrashLoad
			}
			if c.checks {
				if err := ts.Check(); err != nil {
					return c.sum, fmt.Errorf("invariant violated: replica %s: %w", rep.ID, err)
				}
			}
		}
	}
	if c.sc != nil {
		c.sc.finishScale()
	}
	s := &c.sum
	if t := s.Completed + s.Dropped + s.Rejected + s.TimedOut + s.Unfinished + s.SourceFailed; t != s.Injected {
		return c.sum, fmt.Errorf("invariant violated: %d requests injected but %d accounted for", s.Injected, t)
	}
	if c.opts.Progress != nil {
		c.opts.Progress(c.now, s.Injected)
	}
	return c.sum, nil
}

// ErrPrefixClash is a run whose input promised that no two requests share
// their first prefix hash (Options.PrefixUnique) and two did.
var ErrPrefixClash = errors.New("the input promises blis.prefix_unique=true (no two requests share their first prefix_hashes entry), but two requests do")

// clashError is ErrPrefixClash where it was seen: bad input.
type clashError struct {
	path, replica string
	key           uint64
}

func (e *clashError) Error() string {
	return fmt.Sprintf("%s: %v: both were sent to replica %s (their first block's cache key is %016x); blis-convert --count %s names them. Drop the promise from the table's schema metadata", e.path, ErrPrefixClash, e.replica, e.key, e.path)
}
func (e *clashError) Unwrap() error  { return ErrPrefixClash }
func (e *clashError) BadInput() bool { return true }

// clashErr reports a broken blis.prefix_unique promise rep's cache saw.
func (c *Cluster) clashErr(rep *replica.Replica) error {
	if rep.Sched == nil {
		return nil
	}
	if k, ok := rep.Sched.KV().Clash(); ok {
		return &clashError{path: c.opts.Path, replica: rep.ID, key: k}
	}
	return nil
}
