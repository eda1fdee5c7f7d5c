package cluster

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// ready schedules a request whose dependencies have all finished.
func (c *Cluster) ready(r *request.State) {
	// A dependent never starts before its own recorded arrival, which
	// already includes any think time: delay_us counts from the last
	// dependency's finish only.
	own := r.Req.ArrivalUS // row.Null (MinInt64) when absent
	if r.Req.Kind == row.KindTool {
		r.Phase = request.Tool
		start := max(r.ReadyAt(), own, c.now)
		r.Req.ArrivalUS = start
		c.h.push(start+r.Req.DelayUS, evToolDone, -1, r)
		return
	}
	at := max(r.ReadyAt()+r.Req.DelayUS, own, c.now)
	// The dependent's simulated arrival is recorded in arrival_us.
	r.Req.ArrivalUS = at
	r.Phase = request.Arriving
	c.h.push(at, evArrival, -1, r)
}

// terminal records a final state, writes the result and releases
// dependents.
func (c *Cluster) terminal(r *request.State) {
	if r.Phase == request.Done {
		return
	}
	if c.pd != nil && r.PD != nil {
		c.pd.leave(r)
	}
	r.Phase = request.Done
	c.liveRemove(r)
	if r.ClientSlot {
		c.clientFree(r)
	}
	if c.sc != nil {
		c.sc.lastReal = c.now
		if r.Replica >= 0 {
			c.sc.scaleFinished(r)
		}
	}
	c.count(r)
	c.writeResult(r)
	// Release dependents (iteratively: chains can be long).
	c.work = append(c.work[:0], r)
	for len(c.work) > 0 {
		p := c.work[len(c.work)-1]
		c.work = c.work[:len(c.work)-1]
		for _, ch := range p.Children() {
			if ch.Phase == request.Done {
				continue
			}
			ch.Pending--
			if p.Status != row.StatusCompleted {
				if p.Status == row.StatusUnfinished {
					continue // reported with the other unfinished requests
				}
				ch.Status = row.StatusDropped
				ch.Reason = fmt.Sprintf("dependency %s %s", p.Req.ID, p.Status)
				ch.Phase = request.Done
				c.liveRemove(ch)
				c.sum.Dropped++
				c.writeResult(ch)
				c.work = append(c.work, ch)
				continue
			}
			if p.Finished > ch.ReadyAt() {
				ch.Rare().ReadyAt = p.Finished
			}
			if ch.Pending == 0 {
				c.ready(ch)
			}
		}
		if len(p.Children()) > 0 {
			x := p.Rare()
			x.Children = x.Children[:0]
		}
		c.retire(p)
	}
}

func (c *Cluster) count(r *request.State) {
	switch r.Status {
	case row.StatusCompleted:
		c.sum.Completed++
		c.sum.CachedTokens += int64(r.CachedTok)
	case row.StatusDropped:
		c.sum.Dropped++
	case row.StatusRejected:
		c.sum.Rejected++
	case row.StatusTimedOut:
		c.sum.TimedOut++
	case row.StatusUnfinished:
		c.sum.Unfinished++
	case row.StatusSourceFailed:
		c.sum.SourceFailed++
	}
}

func (c *Cluster) writeResult(r *request.State) {
	// Cleared, then filled in place: a composite literal would be built
	// aside and copied over (~700 bytes a row).
	res := &c.res
	*res = row.Result{}
	res.Request = r.Req
	res.Status, res.DropReason, res.InstanceID = r.Status, r.Reason, r.Replica
	res.AdmittedUS, res.RoutedUS, res.EnqueuedUS, res.FirstScheduledUS = r.Admitted, r.Routed, r.Enqueued, r.FirstSched
	res.FirstTokenUS, res.FinishedUS, res.TTFTUS, res.E2EUS, res.TPOTUS = r.FirstTok, r.Finished, row.Null, row.Null, row.Null
	res.Preemptions, res.CachedTokens, res.GeneratedTokens = r.Preemptions, r.CachedTok, r.Generated
	res.CachedTokensGPU, res.KVTransferUS, res.KVTransferWaitUS = r.CachedTok, row.Null, row.Null
	res.ClientWaitUS = c.clientWait(r)
	if c.tierNames != nil {
		c.tierResult(r, res)
	}
	if r.Replica >= 0 {
		rep := c.reps[r.Replica]
		res.ReplicaID, res.Deployment = rep.ID, c.deps[rep.Deployment].ID
	}
	if r.IsPD() {
		c.pd.pdResult(r, res)
	}
	arr := r.Req.ArrivalUS
	if r.FirstTok != row.Null && arr != row.Null {
		res.TTFTUS = r.FirstTok - arr
	}
	if r.Finished != row.Null && arr != row.Null {
		res.E2EUS = r.Finished - arr
	}
	if r.Status == row.StatusCompleted && r.Generated > 1 {
		res.TPOTUS = (r.Finished - r.FirstTok) / int64(r.Generated-1)
	}
	if c.checks && r.Status == row.StatusCompleted && r.Req.Kind == row.KindLLM {
		t := [...]int64{arr, r.Routed, r.Enqueued, r.FirstSched, r.FirstTok, r.Finished}
		for i := 1; i < len(t); i++ {
			if t[i] == row.Null || t[i] < t[i-1] {
				c.fail(fmt.Errorf("invariant violated: request %s timestamps out of order (arrival, routed, enqueued, first scheduled, first token, finished) = %v", r.Req.ID, t))
				break
			}
		}
		if r.Generated != r.Req.OutputTokens {
			c.fail(fmt.Errorf("invariant violated: request %s completed with %d of %d tokens", r.Req.ID, r.Generated, r.Req.OutputTokens))
		}
	}
	if c.opts.Policies.OnResult != nil {
		c.opts.Policies.OnResult(res)
	}
	if err := c.sink.Write(res); err != nil {
		c.fail(err)
	}
}

// tierResult fills the tiered-KV columns: the prompt tokens each lower
// tier served (the rest of cached_tokens came from the GPU), reload time,
// thrashing.
// CachedTokensTier is nil when no lower tier served the request (most
// rows), else carved from a chunk no later result overwrites (a sink may
// keep its results).
func (c *Cluster) tierResult(r *request.State, res *row.Result) {
	t := r.Tier
	if t == nil || len(t.Cached) == 0 || r.Replica < 0 {
		return
	}
	res.KVReloadUS, res.KVThrashTokens = t.ReloadUS, t.ThrashTok
	if t.CachedSum() == 0 {
		return
	}
	n := len(c.tierNames)
	if cap(c.tierBuf)-len(c.tierBuf) < n {
		c.tierBuf = make([]int32, 0, max(1024, n))
	}
	k := len(c.tierBuf)
	c.tierBuf = c.tierBuf[:k+n]
	out := c.tierBuf[k : k+n : k+n]
	cols := c.deps[c.reps[r.Replica].Deployment].tierCol
	for i, v := range t.Cached {
		out[cols[i]] += v
		res.CachedTokensGPU -= v
	}
	res.CachedTokensTier = out
}

// expire handles a client giving up at r's deadline: a request still
// arriving (delayed by admission), in its alpha delay, waiting or running
// is cancelled and its KV freed. A running request on a replica in the
// middle of a step leaves when the step ends (vLLM processes aborts
// between steps); its result says timed_out with the deadline as finish.
func (c *Cluster) expire(r *request.State) {
	switch r.Phase {
	case request.Arriving:
		if c.fc != nil {
			c.fc.cancel(r) // it may wait at the gateway
		}
	case request.Routed:
		rep := c.reps[r.Replica]
		rep.InFlight--
		c.markDirty(rep.Index)
	case request.Waiting, request.Running:
		rep := c.reps[r.Replica]
		c.cut(rep)
		r.Generated = rep.Sched.Progress(r)
		c.markDirty(rep.Index)
		if !rep.Cancel(r) {
			// Leaves at the end of the executing step.
			r.Finished = c.now
			return
		}
		c.kick(rep) // it may have blocked the head of the queue
	case request.Transfer:
		c.pd.cancelTransfer(r)
	default:
		return // pending, tool: not a client request in flight
	}
	r.Finished = c.now
	rp := r.Replica
	c.timedOut(r)
	if c.sc != nil && rp >= 0 && c.reps[rp].State == replica.Draining {
		c.sc.drainedCheck(c.reps[rp])
	}
}

func (c *Cluster) timedOut(r *request.State) {
	r.Cancel = false
	r.Status = row.StatusTimedOut
	r.Reason = fmt.Sprintf("client timeout after %d µs", r.Finished-r.Req.ArrivalUS)
	c.terminal(r)
}
