package cluster

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/trace"
)

// ready schedules a request whose dependencies have all finished.
func (c *Cluster) ready(r *request.State) {
	// A dependent never starts before its own recorded arrival, which
	// already includes any think time: delay_us counts from the last
	// dependency's finish only.
	own := r.Req.ArrivalUS // trace.Null (MinInt64) when absent
	if r.Req.Kind == trace.KindTool {
		r.Phase = request.Tool
		start := max(r.ReadyAt, own, c.now)
		r.Req.ArrivalUS = start
		c.h.push(start+r.Req.DelayUS, evToolDone, -1, r)
		return
	}
	at := max(r.ReadyAt+r.Req.DelayUS, own, c.now)
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
	if c.incoming != nil && r.PReplica >= 0 && (r.XferKV.Blocks() > 0 || r.PrefillOnly && r.XferQueued) {
		c.dropTransfer(r)
	}
	r.Phase = request.Done
	c.liveRemove(r)
	if r.ClientSlot {
		c.clientFree(r)
	}
	if c.sc != nil {
		c.sc.lastReal = c.now
		if r.Replica >= 0 {
			c.scaleFinished(r)
		}
	}
	c.count(r)
	c.writeResult(r)
	// Release dependents (iteratively: chains can be long).
	c.work = append(c.work[:0], r)
	for len(c.work) > 0 {
		p := c.work[len(c.work)-1]
		c.work = c.work[:len(c.work)-1]
		for _, ch := range p.Children {
			if ch.Phase == request.Done {
				continue
			}
			ch.Pending--
			if p.Status != trace.StatusCompleted {
				if p.Status == trace.StatusUnfinished {
					continue // reported with the other unfinished requests
				}
				ch.Status = trace.StatusDropped
				ch.Reason = fmt.Sprintf("dependency %s %s", p.Req.ID, p.Status)
				ch.Phase = request.Done
				c.liveRemove(ch)
				c.sum.Dropped++
				c.writeResult(ch)
				c.work = append(c.work, ch)
				continue
			}
			if p.Finished > ch.ReadyAt {
				ch.ReadyAt = p.Finished
			}
			if ch.Pending == 0 {
				c.ready(ch)
			}
		}
		p.Children = p.Children[:0]
		c.retire(p)
	}
}

func (c *Cluster) count(r *request.State) {
	switch r.Status {
	case trace.StatusCompleted:
		c.sum.Completed++
		c.sum.CachedTokens += int64(r.CachedTok)
	case trace.StatusDropped:
		c.sum.Dropped++
	case trace.StatusRejected:
		c.sum.Rejected++
	case trace.StatusTimedOut:
		c.sum.TimedOut++
	case trace.StatusUnfinished:
		c.sum.Unfinished++
	case trace.StatusSourceFailed:
		c.sum.SourceFailed++
	}
}

func (c *Cluster) writeResult(r *request.State) {
	res := &c.res
	*res = trace.Result{Request: r.Req, Status: r.Status, DropReason: r.Reason, InstanceID: r.Replica,
		AdmittedUS: r.Admitted, RoutedUS: r.Routed, EnqueuedUS: r.Enqueued, FirstScheduledUS: r.FirstSched,
		FirstTokenUS: r.FirstTok, FinishedUS: r.Finished, TTFTUS: trace.Null, E2EUS: trace.Null, TPOTUS: trace.Null,
		Preemptions: r.Preemptions, CachedTokens: r.CachedTok, GeneratedTokens: r.Generated,
		CachedTokensGPU: r.CachedTok - r.CachedLow[0] - r.CachedLow[1], CachedTokensCPU: r.CachedLow[0], CachedTokensStorage: r.CachedLow[1],
		KVReloadUS: r.ReloadUS, KVThrashTokens: r.ThrashTok, KVTransferUS: trace.Null, KVTransferWaitUS: trace.Null,
		ClientWaitUS: c.clientWait(r)}
	if r.Replica >= 0 {
		rep := c.reps[r.Replica]
		res.ReplicaID, res.Deployment = rep.ID, c.deps[rep.Deployment].ID
	}
	if r.PReplica >= 0 {
		c.pdResult(r, res)
	}
	arr := r.Req.ArrivalUS
	if r.FirstTok != trace.Null && arr != trace.Null {
		res.TTFTUS = r.FirstTok - arr
	}
	if r.Finished != trace.Null && arr != trace.Null {
		res.E2EUS = r.Finished - arr
	}
	if r.Status == trace.StatusCompleted && r.Generated > 1 {
		res.TPOTUS = (r.Finished - r.FirstTok) / int64(r.Generated-1)
	}
	if c.checks && r.Status == trace.StatusCompleted && r.Req.Kind == trace.KindLLM {
		t := [...]int64{arr, r.Routed, r.Enqueued, r.FirstSched, r.FirstTok, r.Finished}
		for i := 1; i < len(t); i++ {
			if t[i] == trace.Null || t[i] < t[i-1] {
				c.fail(fmt.Errorf("invariant violated: request %s timestamps out of order (arrival, routed, enqueued, first scheduled, first token, finished) = %v", r.Req.ID, t))
				break
			}
		}
		if r.Generated != r.Req.OutputTokens {
			c.fail(fmt.Errorf("invariant violated: request %s completed with %d of %d tokens", r.Req.ID, r.Generated, r.Req.OutputTokens))
		}
	}
	if c.opts.OnResult != nil {
		c.opts.OnResult(res)
	}
	if err := c.sink.Write(res); err != nil {
		c.fail(err)
	}
}

// expire handles a client giving up at r's deadline: a request still
// arriving (delayed by admission), in its alpha delay, waiting or running
// is cancelled and its KV freed. A running request on a replica in the
// middle of a step leaves when the step ends (vLLM processes aborts
// between steps); its result says timed_out with the deadline as finish.
func (c *Cluster) expire(r *request.State) {
	switch r.Phase {
	case request.Arriving:
	case request.Routed:
		rep := c.reps[r.Replica]
		rep.InFlight--
		c.markDirty(rep.Index)
	case request.Waiting, request.Running:
		rep := c.reps[r.Replica]
		r.Generated = rep.Sched.Progress(r)
		c.markDirty(rep.Index)
		if !rep.Cancel(r) {
			// Leaves at the end of the executing step.
			r.Finished = c.now
			return
		}
		c.kick(rep) // it may have blocked the head of the queue
	case request.Transfer:
		c.cancelTransfer(r)
	default:
		return // pending, tool: not a client request in flight
	}
	r.Finished = c.now
	rp := r.Replica
	c.timedOut(r)
	if c.sc != nil && rp >= 0 && c.reps[rp].State == replica.Draining {
		c.drainedCheck(c.reps[rp])
	}
}

func (c *Cluster) timedOut(r *request.State) {
	r.Cancel = false
	r.Status = trace.StatusTimedOut
	r.Reason = fmt.Sprintf("client timeout after %d µs", r.Finished-r.Req.ArrivalUS)
	c.terminal(r)
}
