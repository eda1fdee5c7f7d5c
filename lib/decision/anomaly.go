package decision

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/trace"
)

// repState is the anomaly detectors' memory of one replica.
type repState struct {
	// preemption storm in progress
	stormStart, stormLast int64
	stormN                int
	stormVictims          []string
	recent                []int64 // times of the last StormCount preemptions (ring)
	rpos                  int
	// recent results scheduled here (ring), for inversions and blocking
	ring []ringEntry
	pos  int
	// cache thrashing: the window of results being summed
	thrash thrashWin
}

// thrashWin sums one replica's reloaded and thrashing prompt tokens over
// the results finishing in a window.
type thrashWin struct {
	start, last      int64
	reloaded, thrash int64
	n                int // results in the window
	ids              []string
}

type ringEntry struct {
	id                       string
	enq, sched, firstTok     int64
	prio, input              int32
	inverted, blocked, valid bool
}

func (r *Recorder) anomaly(typ string, t, end int64, sev string, mag float64, rep, desc string, reqs ...string) {
	r.stats.Anomalies[typ]++
	if r.cfg.Anomalies == nil {
		return
	}
	r.aseq++
	a := &r.anom
	*a = trace.Anomaly{Seq: r.aseq, Type: typ, TimeUS: t, EndUS: end, Severity: sev, Magnitude: mag,
		ReplicaID: rep, Description: desc, Requests: append(a.Requests[:0], reqs...)}
	r.fail(r.cfg.Anomalies.Write(a))
}

// divergence compares a routing row's shadow prediction with the cache hit
// the request actually got: a miss by at least one block is a divergence.
func (r *Recorder) divergence(p *trace.Decision, res *trace.Result) {
	if p.PromptBlocks <= 0 {
		return // no prefix keys: nothing to predict
	}
	r.stats.Routed++
	B := int32(r.c.CandidateBlockSize(res.InstanceID))
	diff := p.ExpectedCacheHitTokens - p.CacheHitTokens
	if diff < B && -diff < B {
		return
	}
	r.stats.ShadowDivergent++
	sev, what := "medium", "predicted more cached tokens than the replica had"
	switch {
	case p.CacheHitTokens == 0:
		sev, what = "high", "predicted a cache hit, the replica had none"
	case diff < 0:
		sev, what = "low", "the replica had more cached tokens than predicted"
	}
	r.anomaly(trace.AnomalyShadowDivergence, p.TimeUS, res.FirstScheduledUS, sev, float64(diff), p.Target,
		fmt.Sprintf("routing of %s to %s: shadow KV expected %d cached prompt tokens, got %d: %s", res.ID, p.Target, p.ExpectedCacheHitTokens, p.CacheHitTokens, what),
		res.ID)
}

// sloCheck flags an llm request under an SLO (blis-sim --slo) that missed a
// target; one that did not complete misses them all (as in blis-report).
func (r *Recorder) sloCheck(res *trace.Result) {
	if r.cfg.SLOs.Empty() || res.Kind != trace.KindLLM || res.Status == trace.StatusSourceFailed {
		return
	}
	slo := r.cfg.SLOs.For(res.SLOClass)
	if slo == nil {
		return
	}
	if res.Status != trace.StatusCompleted {
		t := res.FinishedUS
		if t == trace.Null {
			t = res.ArrivalUS
		}
		r.anomaly(trace.AnomalySLOViolation, t, t, "high", math.NaN(), res.ReplicaID,
			fmt.Sprintf("%s (%s) %s: misses %s", res.ID, classOr(res.SLOClass), res.Status, slo), res.ID)
		return
	}
	worst, name := 0.0, ""
	for m, v := range [...]int64{res.TTFTUS, res.TPOTUS, res.E2EUS} {
		tg := slo.Target[m]
		if tg <= 0 || v == trace.Null {
			continue
		}
		if x := float64(v) / float64(tg); x > 1 && x > worst {
			worst, name = x, [...]string{"ttft", "tpot", "e2e"}[m]
		}
	}
	if worst == 0 {
		return
	}
	sev := "low"
	if worst >= 3 {
		sev = "high"
	} else if worst >= 1.5 {
		sev = "medium"
	}
	r.anomaly(trace.AnomalySLOViolation, res.FirstTokenUS, res.FinishedUS, sev, worst, res.ReplicaID,
		fmt.Sprintf("%s (%s) %s %.2f× its target (%s)", res.ID, classOr(res.SLOClass), name, worst, slo), res.ID)
}

func classOr(c string) string {
	if c == "" {
		return "no class"
	}
	return c
}

// ringCheck compares a request scheduled on a replica with the recent ones
// scheduled there, in both roles (results arrive in finishing order, not
// in scheduling order):
//   - priority_inversion: a request with a higher priority column enqueued
//     before a lower-priority one was first scheduled after it;
//   - head_of_line_blocking: a request waited >= HOLWaitUS in the queue and
//     was first scheduled only when a request enqueued before it with a
//     prompt >= HOLRatio times longer had its first token.
func (r *Recorder) ringCheck(res *trace.Result) {
	st := &r.reps[res.InstanceID]
	if st.ring == nil {
		st.ring = make([]ringEntry, r.cfg.Thresholds.Ring)
	}
	me := ringEntry{id: res.ID, enq: res.EnqueuedUS, sched: res.FirstScheduledUS, firstTok: res.FirstTokenUS,
		prio: res.Priority, input: res.InputTokens, valid: true}
	th := &r.cfg.Thresholds
	for i := range st.ring {
		o := &st.ring[i]
		if !o.valid {
			continue
		}
		// Inversion: hi waited behind lo.
		hi, lo := &me, o
		if o.prio > me.prio {
			hi, lo = o, &me
		}
		if hi.prio > lo.prio && hi.enq < lo.enq && hi.sched > lo.sched && !hi.inverted {
			hi.inverted = true
			r.anomaly(trace.AnomalyPriorityInversion, lo.sched, hi.sched, sevDelay(hi.sched-lo.sched), float64(hi.sched-lo.sched), res.ReplicaID,
				fmt.Sprintf("%s (priority %d) enqueued before %s (priority %d) but scheduled %.1f ms after it", hi.id, hi.prio, lo.id, lo.prio, float64(hi.sched-lo.sched)/1000),
				hi.id, lo.id)
		}
		// Blocking: short waited for long's prefill.
		short, long := &me, o
		if o.input < me.input {
			short, long = o, &me
		}
		wait := short.sched - short.enq
		if !short.blocked && wait >= th.HOLWaitUS && long.enq <= short.enq && long.input >= th.HOLRatio*max(short.input, 1) &&
			long.firstTok != trace.Null && short.sched >= long.firstTok-1 && long.sched <= short.sched && short.sched-long.firstTok <= th.HOLWaitUS/10 {
			short.blocked = true
			r.anomaly(trace.AnomalyHeadOfLine, short.enq, short.sched, sevDelay(wait), float64(wait), res.ReplicaID,
				fmt.Sprintf("%s (%d prompt tokens) waited %.1f ms in the queue behind %s's %d-token prefill", short.id, short.input, float64(wait)/1000, long.id, long.input),
				short.id, long.id)
		}
	}
	st.ring[st.pos] = me
	st.pos = (st.pos + 1) % len(st.ring)
}

func sevDelay(us int64) string {
	switch {
	case us >= 1_000_000:
		return "high"
	case us >= 100_000:
		return "medium"
	}
	return "low"
}

// storm counts preemptions per replica: StormCount of them within
// StormWindowUS open a storm, which lasts until a window passes without
// one; it is written when it ends.
func (r *Recorder) storm(now int64, rep *replica.Replica, victim *request.State) {
	th := &r.cfg.Thresholds
	st := &r.reps[rep.Index]
	if st.stormN > 0 && now-st.stormLast > th.StormWindowUS {
		r.endStorm(int(rep.Index))
	}
	if st.recent == nil {
		st.recent = make([]int64, th.StormCount)
		for i := range st.recent {
			st.recent[i] = math.MinInt64
		}
	}
	oldest := st.recent[st.rpos]
	st.recent[st.rpos] = now
	st.rpos = (st.rpos + 1) % len(st.recent)
	if st.stormN == 0 && oldest != math.MinInt64 && now-oldest <= th.StormWindowUS {
		st.stormStart, st.stormN = oldest, th.StormCount-1
		st.stormVictims = st.stormVictims[:0]
	}
	if st.stormN > 0 {
		st.stormN++
		st.stormLast = now
		if len(st.stormVictims) < 10 {
			st.stormVictims = append(st.stormVictims, victim.Req.ID)
		}
	}
}

func (r *Recorder) endStorm(i int) {
	st := &r.reps[i]
	if st.stormN == 0 {
		return
	}
	id := r.c.Replicas()[i].ID
	dur := st.stormLast - st.stormStart
	sev := "medium"
	if st.stormN >= 4*r.cfg.Thresholds.StormCount {
		sev = "high"
	}
	r.anomaly(trace.AnomalyPreemptionStorm, st.stormStart, st.stormLast, sev, float64(st.stormN), id,
		fmt.Sprintf("%d preemptions on %s in %.1f ms (KV exhausted; victims from the storm's detection on, at most 10)", st.stormN, id, float64(dur)/1000),
		st.stormVictims...)
	st.stormN = 0
}

// thrashCheck adds a result of a replica with lower KV tiers to its
// thrashing window; a result past the window closes it first.
func (r *Recorder) thrashCheck(res *trace.Result) {
	i := int(res.InstanceID)
	w := &r.reps[i].thrash
	t := res.FinishedUS
	if t == trace.Null {
		t = res.FirstScheduledUS
	}
	if w.n > 0 && t-w.start >= r.cfg.Thresholds.ThrashWindowUS {
		r.endThrash(i)
	}
	if w.n == 0 {
		w.start = t
	}
	w.n++
	w.last = max(w.last, t)
	for _, v := range res.CachedTokensTier {
		w.reloaded += int64(v)
	}
	if res.KVThrashTokens > 0 {
		w.thrash += int64(res.KVThrashTokens)
		if len(w.ids) < 10 {
			w.ids = append(w.ids, res.ID)
		}
	}
}

// endThrash closes replica i's thrashing window: a cache_thrashing anomaly
// when enough of its reloaded tokens were thrashing.
func (r *Recorder) endThrash(i int) {
	w := &r.reps[i].thrash
	th := &r.cfg.Thresholds
	if w.n > 0 && w.reloaded > 0 && w.thrash >= th.ThrashMinTokens && float64(w.thrash) >= th.ThrashFraction*float64(w.reloaded) {
		frac := float64(w.thrash) / float64(w.reloaded)
		sev := "low"
		if frac >= 0.5 {
			sev = "high"
		} else if frac >= 0.25 {
			sev = "medium"
		}
		id := r.c.Replicas()[i].ID
		r.anomaly(trace.AnomalyCacheThrashing, w.start, w.last, sev, frac, id,
			fmt.Sprintf("%d of %d prompt tokens reloaded from lower KV tiers on %s were thrashing (reloaded, evicted from the GPU and reloaded within 1 s): %.1f%%, threshold %.0f%% and %d tokens",
				w.thrash, w.reloaded, id, 100*frac, 100*th.ThrashFraction, th.ThrashMinTokens),
			w.ids...)
	}
	*w = thrashWin{ids: w.ids[:0]}
}
