package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Advance tells the cluster that every row hanging off a root arriving
// before t has been injected (a sorted table's promise): finished requests
// older than that can be forgotten and their memory reused.
func (c *Cluster) Advance(t int64) {
	if t > c.frontier {
		c.frontier = t
		c.purge()
	}
}

// InputDone says no more rows will come.
func (c *Cluster) InputDone() {
	c.awaiting = nil
	c.frontier = math.MaxInt64
	c.purge()
}

// Inject registers one row (row is its 1-based position, for errors). A
// row must come after the rows it depends on. Errors are *row.RowError.
func (c *Cluster) Inject(req *row.Request, n int64) error {
	r := c.newState()
	r.Req = *req
	if c.ids.put(r) != nil {
		r.Req = row.Request{}
		c.pool = append(c.pool, r)
		return c.rowErr(req, n, "column %s: duplicate id %q", row.ColRequestID, req.ID)
	}
	r.Row = n
	c.sum.Injected++
	if n := int64(c.ids.len()); n > c.sum.PeakHeld {
		c.sum.PeakHeld = n
	}
	c.liveAdd(r)
	r.Phase = request.Pending
	r.RootArr = req.ArrivalUS
	if len(req.DependsOn) > 0 {
		r.RootArr = math.MinInt64
	}
	failed := req.SourceStatus == row.SourceFailed
	var blocked *request.State
	for _, id := range req.DependsOn {
		p := c.ids.get(id)
		if p == nil {
			where := "in the table"
			if c.opts.Streamed {
				where = "among earlier rows (in a table sorted by arrival a request must come after its dependencies)"
			}
			return c.rowErr(req, n, "column %s: %q not found %s", row.ColDependsOn, id, where)
		}
		if p == r {
			return c.rowErr(req, n, "column %s: depends on itself", row.ColDependsOn)
		}
		if p.RootArr > r.RootArr {
			r.RootArr = p.RootArr
		}
		if failed {
			continue
		}
		if p.Phase == request.Done {
			if p.Status != row.StatusCompleted && blocked == nil {
				blocked = p
			}
			if p.Finished > r.ReadyAt() {
				r.Rare().ReadyAt = p.Finished
			}
			continue
		}
		x := p.Rare()
		x.Children = append(x.Children, r)
		r.Pending++
	}
	if failed {
		r.Status = row.StatusSourceFailed
		c.terminal(r)
		return nil
	}
	if len(req.DependsOn) == 0 {
		r.Phase = request.Arriving
		c.h.push(req.ArrivalUS, evArrival, -1, r)
		c.awaiting = r
		return nil
	}
	if blocked != nil {
		r.Status = row.StatusDropped
		r.Reason = fmt.Sprintf("dependency %s %s", blocked.Req.ID, blocked.Status)
		c.terminal(r)
		return nil
	}
	if r.Pending == 0 {
		c.ready(r)
	}
	return nil
}

// WriteUnread writes the result of a row never simulated: one read after
// the horizon (unfinished, "arrives after horizon"), or failed in its
// source trace. Memory stays constant however many such rows follow.
func (c *Cluster) WriteUnread(req *row.Request) {
	r := &c.unread
	r.Reset()
	r.Req = *req
	r.Status, r.Reason = row.StatusUnfinished, "arrives after horizon"
	if req.SourceStatus == row.SourceFailed {
		r.Status, r.Reason = row.StatusSourceFailed, ""
		c.sum.SourceFailed++
	} else {
		c.sum.Unfinished++
	}
	c.sum.Injected++
	c.writeResult(r)
}

// WarmID is a hint that a row with this ID is injected next: the ID
// index's slot for it is read ahead, so that Inject's probe, a row later,
// finds it in cache (at 1,000 replicas the index is tens of thousands of
// slots, and each new ID's home is a miss).
func (c *Cluster) WarmID(id string) { c.ids.warmID(id) }

func (c *Cluster) newState() *request.State {
	var r *request.State
	if n := len(c.pool); n > 0 {
		r = c.pool[n-1]
		c.pool = c.pool[:n-1]
	} else {
		// Carved from a slab: at 1,000 replicas tens of thousands are live,
		// and the collector marks and queues a slab once, not each State
		// (States are pooled, never freed, so a slab lives as long as its
		// States would). Slabs double from a small first one, so a small
		// run or a fork pays for few.
		if len(c.slab) == 0 {
			c.slabN = min(max(2*c.slabN, stateSlabMin), stateSlabMax)
			c.slab = make([]request.State, c.slabN)
		}
		r = &c.slab[0]
		c.slab = c.slab[1:]
	}
	r.Reset()
	return r
}

// A slab holds 16 States at first (10 KB), up to 256 (160 KB).
const (
	stateSlabMin = 16
	stateSlabMax = 256
)

func (c *Cluster) liveAdd(r *request.State) {
	r.LPrev, r.LNext = c.liveT, nil
	if c.liveT != nil {
		c.liveT.LNext = r
	} else {
		c.liveH = r
	}
	c.liveT = r
}

func (c *Cluster) liveRemove(r *request.State) {
	if r.LPrev != nil {
		r.LPrev.LNext = r.LNext
	} else {
		c.liveH = r.LNext
	}
	if r.LNext != nil {
		r.LNext.LPrev = r.LPrev
	} else {
		c.liveT = r.LPrev
	}
	r.LPrev, r.LNext = nil, nil
}

// retire drops a finished request from the id index once no later row can
// name it, and reuses its memory.
func (c *Cluster) retire(r *request.State) {
	if r.Retired {
		return
	}
	r.Retired = true
	c.retired.Push(retireEntry{r})
	c.purge()
}

func (c *Cluster) purge() {
	for c.retired.Len() > 0 && c.retired.S[0].r.RootArr < c.frontier {
		r := c.retired.Pop().r
		// r is the id's entry: every retired request was registered by
		// Inject, which refuses an id already there until this delete.
		c.ids.remove(r)
		if r.Pending == 0 {
			r.Req = row.Request{}
			c.pool = append(c.pool, r)
		}
	}
}
