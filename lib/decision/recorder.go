// Package decision records what the router and the schedulers decided
// (the decisions table), compares the router's view of the prefix caches
// (the shadow KV, fed by late KV events) with the hits requests got,
// detects anomalies (the anomalies table) and measures the
// counterfactual regret of sampled routing decisions by forking the
// cluster. It plugs into the engine through cluster.Options.Decisions,
// the cluster's forks (Cluster.ForkReplica, Cluster.Fork) and a wrapper around the results sink; with
// none of them set the engine pays nothing (docs/evaluator.md).
//
// Rows stream out: an admission, priority, preemption or batch row is
// written when decided; a routing row is held until its request's result
// (it carries the request's TTFT and actual cache hit), so memory grows
// with the requests in flight, not with the decisions.
package decision

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Level is how much a run records.
type Level uint8

// Trace levels.
const (
	Minimal   Level = iota // nothing (no hook in the engine)
	Decisions              // admission, priority, routing, preemption (and scale, kv_transfer) rows
	Full                   // and one batch row per step
)

// ParseLevel reads --trace-level.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "minimal", "":
		return Minimal, nil
	case "decisions":
		return Decisions, nil
	case "full":
		return Full, nil
	}
	return 0, fmt.Errorf("expected minimal, decisions or full, found %q", s)
}

func (l Level) String() string { return [...]string{"minimal", "decisions", "full"}[l] }

// DecisionSink receives decision rows; *trace.DecisionWriter is one.
type DecisionSink interface{ Write(*trace.Decision) error }

// AnomalySink receives anomaly rows; *trace.AnomalyWriter is one.
type AnomalySink interface{ Write(*trace.Anomaly) error }

// Config says what to record.
type Config struct {
	Level     Level
	Decisions DecisionSink // nil: decisions are not written (anomalies or regret only)
	Anomalies AnomalySink  // nil: anomalies are counted, not written
	TopK      int          // candidates kept per routing row (0: 3)
	SLOs      *slo.Set
	// PriorityName names the priority policy in priority rows' reasons.
	PriorityName string
	Thresholds   Thresholds
	Regret       RegretConfig
}

// Thresholds of the anomaly detectors (zero values take the defaults).
type Thresholds struct {
	StormCount    int   // preemptions on one replica within StormWindowUS that make a storm (8)
	StormWindowUS int64 // (1 s)
	HOLWaitUS     int64 // queue wait that counts as blocked (100 ms)
	HOLRatio      int32 // the blocker's prompt is at least this many times the blocked one's (8)
	Ring          int   // recent results per replica compared for inversions and blocking (64)
	// Cache thrashing (tiered KV): a replica whose results finishing within
	// ThrashWindowUS (10 s) reloaded prompt tokens from lower tiers of which
	// at least ThrashFraction (0.1, blis-report's kv_tiers rule) were
	// thrashing (reloaded, evicted from the GPU and reloaded again within
	// 1 s: kv.ThrashWindowUS), and at least ThrashMinTokens (256) of them.
	ThrashWindowUS  int64
	ThrashFraction  float64
	ThrashMinTokens int64
}

func (t *Thresholds) defaults() {
	if t.StormCount <= 0 {
		t.StormCount = 8
	}
	if t.StormWindowUS <= 0 {
		t.StormWindowUS = 1_000_000
	}
	if t.HOLWaitUS <= 0 {
		t.HOLWaitUS = 100_000
	}
	if t.HOLRatio <= 0 {
		t.HOLRatio = 8
	}
	if t.Ring <= 0 {
		t.Ring = 64
	}
	if t.ThrashWindowUS <= 0 {
		t.ThrashWindowUS = 10_000_000
	}
	if t.ThrashFraction <= 0 {
		t.ThrashFraction = 0.1
	}
	if t.ThrashMinTokens <= 0 {
		t.ThrashMinTokens = 256
	}
}

// Stats are the run's decision-level metrics.
type Stats struct {
	Decisions       int64            // rows recorded (all kinds)
	Held            int64            // routing decisions that held their request at the router (action wait)
	ByKind          map[string]int64 // rows per kind
	Routed          int64            // routing decisions whose request was scheduled (shadow comparisons)
	ShadowDivergent int64            // of those, where the shadow model's prediction missed by at least a block
	Anomalies       map[string]int64 // per type
	RegretSamples   int64
	// RegretSampled counts the routing decisions --regret-sample picked,
	// RegretNoAlternative those of them that could not be replayed
	// because they had one candidate replica (nothing to compare with).
	RegretSampled, RegretNoAlternative int64
	RegretMeanUS                       float64 // mean regret (chosen − best alternative TTFT) over sampled decisions
	RegretPositive                     int64   // sampled decisions where an alternative was better
	WindowRegretMean                   float64
}

// ShadowDivergenceRate is ShadowDivergent / Routed (NaN with no routing).
func (s *Stats) ShadowDivergenceRate() float64 {
	if s.Routed == 0 {
		return math.NaN()
	}
	return float64(s.ShadowDivergent) / float64(s.Routed)
}

// Recorder is the engine's decisions hook. Use New, then Attach.
type Recorder struct {
	cfg   Config
	c     *cluster.Cluster
	seq   int64
	err   error
	row   trace.Decision
	pend  map[string]*trace.Decision
	free  []*trace.Decision
	cbuf  []int
	stats Stats

	reps  []repState // anomaly state by replica index
	tiers []string   // the run's lower KV tiers (results' CachedTokensTier order)
	tierB []byte     // hit_tier being built
	anom  trace.Anomaly
	aseq  int64

	regret regretState
}

// New returns a recorder for cfg.
func New(cfg Config) *Recorder {
	if cfg.TopK <= 0 {
		cfg.TopK = 3
	}
	cfg.Thresholds.defaults()
	r := &Recorder{cfg: cfg, pend: map[string]*trace.Decision{}}
	r.stats.ByKind = map[string]int64{}
	r.stats.Anomalies = map[string]int64{}
	r.regret.init(&cfg.Regret)
	return r
}

// Attach connects the recorder to a run's options (opts.Decisions). The
// results sink must be wrapped with Sink.
func (r *Recorder) Attach(opts *cluster.Options) {
	opts.Decisions = r
}

// Bind gives the recorder the cluster it hears (for block sizes and forks).
func (r *Recorder) Bind(c *cluster.Cluster) {
	r.c = c
	n := len(c.Replicas())
	r.reps = make([]repState, n)
	r.tiers = c.Summary().TierNames
}

// Err is the first write error.
func (r *Recorder) Err() error { return r.err }

// Stats returns the metrics so far.
func (r *Recorder) Stats() Stats { return r.stats }

func (r *Recorder) fail(err error) {
	if r.err == nil && err != nil {
		r.err = err
	}
}

func (r *Recorder) emit(d *trace.Decision) {
	r.stats.Decisions++
	r.stats.ByKind[d.Kind]++
	if r.cfg.Decisions != nil && r.cfg.Level >= Decisions {
		r.fail(r.cfg.Decisions.Write(d))
	}
}

func (r *Recorder) begin(now int64, kind string, st *request.State) *trace.Decision {
	d := &r.row
	d.Reset()
	r.seq++
	d.Seq, d.TimeUS, d.Kind = r.seq, now, kind
	if st != nil {
		d.RequestID, d.TenantID, d.SLOClass = st.Req.ID, st.Req.TenantID, st.Req.SLOClass
	}
	return d
}

// aggregate fills d's snapshot with the candidates' totals (what admission
// and priority policies see): Σ waiting, running, in flight, mean KV use.
func aggregate(d *trace.Decision, v *policy.ClusterView) {
	var w, ru, f int
	var kv float64
	for i := 0; i < v.Len(); i++ {
		rv := v.Replica(i)
		w, ru, f, kv = w+rv.Waiting(), ru+rv.Running(), f+rv.InFlight(), kv+rv.KVUtilization()
	}
	d.Waiting, d.Running, d.InFlight = int32(w), int32(ru), int32(f)
	if v.Len() > 0 {
		d.KVUtil = kv / float64(v.Len())
	}
}

// Admitted records an admission decision.
func (r *Recorder) Admitted(now int64, st *request.State, a policy.AdmitDecision, v *policy.ClusterView) {
	d := r.begin(now, trace.DecisionAdmission, st)
	d.Action, d.Reason = a.Verdict.String(), a.Reason
	if a.Verdict == policy.Delay {
		d.Value = a.DelayUS
	}
	if r.rows() {
		aggregate(d, v)
	}
	r.emit(d)
}

// rows reports whether decision rows are written. When they are not (a run
// that keeps only anomalies, regret or the counts), the snapshots a row
// carries are not computed: at 1,000 replicas they were most of the cost.
func (r *Recorder) rows() bool { return r.cfg.Decisions != nil && r.cfg.Level >= Decisions }

// Prioritized records a priority decision.
func (r *Recorder) Prioritized(now int64, st *request.State, prio float64, v *policy.ClusterView) {
	d := r.begin(now, trace.DecisionPriority, st)
	d.Action, d.Score = "assign", prio
	if prio == math.Trunc(prio) && math.Abs(prio) < 1<<62 {
		d.Value = int64(prio)
	}
	d.Reason = r.cfg.PriorityName
	if r.rows() {
		aggregate(d, v)
	}
	r.emit(d)
}

// Routed records a routing decision; its row is written with the
// request's result.
func (r *Recorder) Routed(now int64, st *request.State, rd policy.RouteDecision, v *policy.ClusterView, cands []int32) {
	d := r.begin(now, trace.DecisionRouting, st)
	if rd.Wait {
		// A hold: written now (its request is routed later, by another
		// routing row), with what the policy saw of the candidates.
		d.Action, d.Reason, d.Value = "wait", rd.Reason, rd.WaitUS
		r.stats.Held++
		if r.rows() {
			aggregate(d, v)
			r.topK(d, v, -1)
			for _, f := range v.Filtered() {
				d.Filtered = append(d.Filtered, trace.Filtered{ReplicaID: v.Replica(f.Index).ID(), Reason: f.Reason})
			}
		}
		r.emit(d)
		return
	}
	rep := v.Replica(rd.Target)
	d.Target, d.Action, d.Reason = rep.ID(), "route", rd.Reason
	sampled := r.regret.wants(st)
	if r.rows() || sampled {
		d.Waiting, d.Running, d.InFlight = int32(rep.Waiting()), int32(rep.Running()), int32(rep.InFlight())
		d.KVUtil = rep.KVUtilization()
		d.CachedBlocks = int32(v.CachedBlocks(rd.Target))
		r.topK(d, v, rd.Target)
		for _, f := range v.Filtered() {
			d.Filtered = append(d.Filtered, trace.Filtered{ReplicaID: v.Replica(f.Index).ID(), Reason: f.Reason})
		}
	}
	d.PromptBlocks = int32(len(st.Keys))
	// The shadow KV's prediction: the router's prefix index, built from
	// the replicas' KV events as late as it hears them (kv_event_delay).
	gi := cands[rd.Target]
	B := r.c.CandidateBlockSize(gi)
	exp := int64(v.CachedBlocks(rd.Target)) * int64(B)
	if lim := int64(st.Req.InputTokens) - 1; exp > lim {
		exp = max(lim, 0)
	}
	d.ExpectedCacheHitTokens = int32(exp)
	if sampled {
		r.stats.RegretSampled++
		r.counterfactual(d, st, rd.Target, cands)
	}
	// Hold the row until the request's result.
	p := r.alloc()
	cs, fs := p.Candidates, p.Filtered
	*p = *d
	p.Candidates = append(cs[:0], d.Candidates...)
	p.Filtered = append(fs[:0], d.Filtered...)
	r.pend[st.Req.ID] = p
}

func (r *Recorder) alloc() *trace.Decision {
	if n := len(r.free); n > 0 {
		p := r.free[n-1]
		r.free = r.free[:n-1]
		return p
	}
	return &trace.Decision{}
}

// topK fills d.Candidates: the k best-scored candidates (or, when the
// policy does not score, the least loaded), the chosen one always among
// them, first (chosen < 0: none chosen, a hold).
func (r *Recorder) topK(d *trace.Decision, v *policy.ClusterView, chosen int) {
	n := v.Len()
	scores := v.Scores()
	idx := r.cbuf[:0]
	for i := 0; i < n; i++ {
		if i != chosen {
			idx = append(idx, i)
		}
	}
	k := min(r.cfg.TopK-1, len(idx))
	if chosen < 0 {
		k = min(r.cfg.TopK, len(idx))
	}
	better := func(a, b int) bool {
		if scores != nil {
			if scores[a] != scores[b] {
				return scores[a] > scores[b]
			}
			return a < b
		}
		la, lb := v.Replica(a).Load(), v.Replica(b).Load()
		return la < lb || la == lb && a < b
	}
	// Partial selection: k passes (k is small, groups can be large).
	for j := 0; j < k; j++ {
		m := j
		for i := j + 1; i < len(idx); i++ {
			if better(idx[i], idx[m]) {
				m = i
			}
		}
		idx[j], idx[m] = idx[m], idx[j]
	}
	r.cbuf = idx
	add := func(i int) {
		rv := v.Replica(i)
		c := trace.Candidate{ReplicaID: rv.ID(), Score: math.NaN(), Waiting: int32(rv.Waiting()), Running: int32(rv.Running()),
			InFlight: int32(rv.InFlight()), KVUtil: rv.KVUtilization(), CachedBlocks: int32(v.CachedBlocks(i)),
			CFTTFTUS: trace.Null, CFWindowTTFTUS: math.NaN()}
		if scores != nil {
			c.Score = scores[i]
		}
		d.Candidates = append(d.Candidates, c)
	}
	if chosen >= 0 {
		add(chosen)
	}
	for _, i := range idx[:k] {
		add(i)
	}
}

// candIndex maps d.Candidates back to view indices (chosen first).
func (r *Recorder) candIndex(chosen int) []int {
	out := []int{chosen}
	k := min(r.cfg.TopK-1, len(r.cbuf))
	return append(out, r.cbuf[:k]...)
}

// Preempted records a preemption.
func (r *Recorder) Preempted(now int64, rep *replica.Replica, victim *request.State) {
	d := r.begin(now, trace.DecisionPreemption, victim)
	d.Target, d.Action = rep.ID, "preempt"
	d.Reason = "KV blocks exhausted: recompute preemption (victim: the newest running request, or the victim policy's)"
	d.Value = int64(victim.Preemptions) + 1
	l := rep.Sched.Load()
	d.Waiting, d.Running = int32(l.Waiting), int32(l.Running)
	if l.KVTotal > 0 {
		d.KVUtil = float64(l.KVUsed) / float64(l.KVTotal)
	}
	r.emit(d)
	r.storm(now, rep, victim)
}

// WantBatches says whether batch rows are recorded (trace level full).
func (r *Recorder) WantBatches() bool { return r.cfg.Level >= Full && r.cfg.Decisions != nil }

// Batch records a step's batch formation.
func (r *Recorder) Batch(s *trace.Step) {
	d := r.begin(s.StartUS, trace.DecisionBatch, nil)
	d.Target, d.Action, d.Value = s.ReplicaID, "form", int64(s.BatchSize)
	d.Reason = fmt.Sprintf("vllm: %d prefill tokens, %d decoding, %d preempted", s.PrefillTokens, s.DecodeTokens, s.Preempted)
	d.Waiting, d.Running = s.Waiting, s.Running
	if s.KVBlocksTotal > 0 {
		d.KVUtil = float64(s.KVBlocksUsed) / float64(s.KVBlocksTotal)
	}
	r.emit(d)
}

// Scale records a scaling decision (autoscaling calls it through
// cluster.TraceScale).
func (r *Recorder) Scale(now int64, deployment, replicaID, action, reason string, replicas int) {
	d := r.begin(now, trace.DecisionScale, nil)
	d.Target, d.Action, d.Reason, d.Value = replicaID, action, reason, int64(replicas)
	if d.Target == "" {
		d.Target = deployment
	}
	r.emit(d)
}

// KVTransfer records a KV transfer (disaggregated serving calls it
// through cluster.TraceKVTransfer).
func (r *Recorder) KVTransfer(now int64, st *request.State, from, to string, blocks int64, reason string) {
	d := r.begin(now, trace.DecisionKVTransfer, st)
	d.Target, d.Action, d.Value = to, "transfer from "+from, blocks
	d.Reason = reason
	r.emit(d)
}

// Disagg records a decision of disaggregated serving: the P/D decider's,
// or a decode or encode replica's pick, with what the policy saw of the
// replica it is about.
func (r *Recorder) Disagg(now int64, st *request.State, kind string, v *policy.ClusterView, target int, action, reason string, value int64) {
	d := r.begin(now, kind, st)
	rep := v.Replica(target)
	d.Target, d.Action, d.Reason, d.Value = rep.ID(), action, reason, value
	if r.rows() {
		d.Waiting, d.Running, d.InFlight = int32(rep.Waiting()), int32(rep.Running()), int32(rep.InFlight())
		d.KVUtil = rep.KVUtilization()
		d.CachedBlocks = int32(v.CachedBlocks(target))
		d.PromptBlocks = int32(len(st.Keys))
	}
	r.emit(d)
}

// FlowControl records a decision of the gateway's flow control.
func (r *Recorder) FlowControl(now int64, st *request.State, action, reason string, value int64) {
	d := r.begin(now, trace.DecisionFlow, st)
	d.Action, d.Reason, d.Value = action, reason, value
	r.emit(d)
}

// Anomaly records an anomaly found by a feature of the cluster.
func (r *Recorder) Anomaly(a *trace.Anomaly) {
	r.anomaly(a.Type, a.TimeUS, a.EndUS, a.Severity, a.Magnitude, a.ReplicaID, a.Description, a.Requests...)
}

// Sink wraps the results sink: each result completes its routing row and
// feeds the detectors.
func (r *Recorder) Sink(next cluster.Sink) cluster.Sink { return &resultTap{r: r, next: next} }

type resultTap struct {
	r    *Recorder
	next cluster.Sink
}

func (t *resultTap) Write(res *trace.Result) error {
	t.r.result(res)
	if t.r.err != nil {
		return t.r.err
	}
	return t.next.Write(res)
}

func (r *Recorder) result(res *trace.Result) {
	if p := r.pend[res.ID]; p != nil {
		delete(r.pend, res.ID)
		p.TTFTUS, p.Status = res.TTFTUS, res.Status
		if res.FirstScheduledUS != trace.Null {
			p.CacheHitTokens = res.CachedTokens
			p.HitTier = r.hitTier(res)
			r.divergence(p, res)
		}
		r.emit(p)
		r.free = append(r.free, p)
	}
	r.sloCheck(res)
	if res.InstanceID >= 0 && res.FirstScheduledUS != trace.Null && int(res.InstanceID) < len(r.reps) {
		r.ringCheck(res)
		if res.CachedTokensTier != nil || res.KVThrashTokens > 0 || r.reps[res.InstanceID].thrash.n > 0 {
			r.thrashCheck(res)
		}
	}
}

// hitTier names the tiers the request's cache hit came from, top down,
// joined by "+": "gpu", "cpu", "gpu+cpu", "gpu+cpu+storage", …; "none"
// without a hit.
func (r *Recorder) hitTier(res *trace.Result) string {
	if res.CachedTokens <= 0 {
		return "none"
	}
	if res.CachedTokensTier == nil {
		return "gpu" // no lower tier served it: the common case, no allocation
	}
	b := r.tierB[:0]
	if res.CachedTokensGPU > 0 {
		b = append(b, "gpu"...)
	}
	for i, v := range res.CachedTokensTier {
		if v > 0 && i < len(r.tiers) {
			if len(b) > 0 {
				b = append(b, '+')
			}
			b = append(b, r.tiers[i]...)
		}
	}
	r.tierB = b
	if len(b) == 0 {
		return "gpu"
	}
	return string(b)
}

// Close writes the rows still held (requests without a result: none after
// a complete run) and the storms still open.
func (r *Recorder) Close() error {
	ids := make([]string, 0, len(r.pend))
	for id := range r.pend {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return r.pend[ids[a]].Seq < r.pend[ids[b]].Seq })
	for _, id := range ids {
		r.emit(r.pend[id])
		delete(r.pend, id)
	}
	for i := range r.reps {
		r.endStorm(i)
		r.endThrash(i)
	}
	r.stats.RegretSamples = r.regret.n
	if r.regret.n > 0 {
		r.stats.RegretMeanUS = r.regret.sum / float64(r.regret.n)
		r.stats.WindowRegretMean = r.regret.wsum / float64(r.regret.n)
		r.stats.RegretPositive = r.regret.pos
	}
	return r.err
}

// Describe is a one-line account for blis-sim's stderr summary.
func (s *Stats) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decisions: %d", s.Decisions)
	kinds := make([]string, 0, len(s.ByKind))
	for k := range s.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s=%d", k, s.ByKind[k])
	}
	if s.Routed > 0 {
		fmt.Fprintf(&b, "; shadow KV divergence %.2f%% (%d of %d)", 100*s.ShadowDivergenceRate(), s.ShadowDivergent, s.Routed)
	}
	types := make([]string, 0, len(s.Anomalies))
	for k := range s.Anomalies {
		types = append(types, k)
	}
	sort.Strings(types)
	if len(types) > 0 {
		b.WriteString("; anomalies:")
		for _, k := range types {
			fmt.Fprintf(&b, " %s=%d", k, s.Anomalies[k])
		}
	}
	if s.RegretSamples > 0 {
		fmt.Fprintf(&b, "; regret: %d samples, mean %.1f ms, %d with a better alternative", s.RegretSamples, s.RegretMeanUS/1000, s.RegretPositive)
	}
	return b.String()
}

// RegretWarning says why a run asked for regret (sample > 0) replayed no
// routing decision, or "" when some were replayed: no decision was
// sampled, or every one sampled had a single candidate replica (one
// replica, or one serving the request's model), so there was nothing to
// compare it with.
func (s *Stats) RegretWarning(sample float64) string {
	switch {
	case sample <= 0 || s.RegretSamples > 0:
		return ""
	case s.RegretSampled == 0:
		return fmt.Sprintf("--regret-sample %g replayed no routing decision: none of the %d was sampled (raise --regret-sample)", sample, s.ByKind[trace.DecisionRouting])
	case s.RegretNoAlternative == s.RegretSampled:
		return fmt.Sprintf("--regret-sample %g replayed no routing decision: each of the %d sampled had no other candidate replica to compare it with (regret needs two or more replicas serving a request's model, and --top-k 2 or more)", sample, s.RegretSampled)
	}
	return fmt.Sprintf("--regret-sample %g replayed none of the %d routing decisions sampled (%d had no other candidate replica)", sample, s.RegretSampled, s.RegretNoAlternative)
}
