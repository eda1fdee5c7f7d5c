package decision

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// RegretConfig samples routing decisions for counterfactual replay.
type RegretConfig struct {
	Sample   float64 // fraction of requests whose first routing decision is replayed (0 = off)
	Seed     uint64  // which requests: a hash of (seed, request id) below Sample
	WindowUS int64   // replay window (0: 2 s)
}

// DefaultWindowUS is the replay window when none is given.
const DefaultWindowUS = 2_000_000

// Schema metadata of a decisions table whose routing rows were sampled.
const (
	MetaRegretSample   = "blis.regret_sample"
	MetaRegretWindowUS = "blis.regret_window_us"
)

// DescribeRegret records the regret sampling in a decisions table's
// metadata (the summary reads the window to mark censored replays).
func DescribeRegret(md trace.Meta, cfg RegretConfig) {
	if cfg.Sample <= 0 {
		return
	}
	w := cfg.WindowUS
	if w <= 0 {
		w = DefaultWindowUS
	}
	md.Set(MetaRegretSample, strconv.FormatFloat(cfg.Sample, 'g', -1, 64))
	md.Set(MetaRegretWindowUS, strconv.FormatInt(w, 10))
}

type regretState struct {
	cfg    *RegretConfig
	n, pos int64
	sum    float64
	wsum   float64
	thresh uint64

	// Forks come from one arena (a fork is dead once its numbers are
	// read); the rest is scratch kept across samples.
	arena cluster.ForkArena
	win   []winReq
	alone []int64 // per candidate: Σ TTFT of its window requests without the request
	with  []int64 // and with the request placed on it
	nwin  []int   // its window requests
	rwin  []int64 // the request's TTFT (censored at the window's end) when placed there
	ttft  []int64 // the request's TTFT (censored at 4 windows)
	gidx  []int32 // the candidates' cluster-wide replica indices

	// samples replayed with one-replica forks, and those an autoscaler's
	// next action cut short (replayed again with whole-cluster forks)
	restrictedN, cutN int64
}

// winReq is a fork's copy of a window request and its arrival.
type winReq struct {
	s   *request.State
	arr int64
}

func (g *regretState) init(cfg *RegretConfig) {
	g.cfg = cfg
	if cfg.WindowUS <= 0 {
		cfg.WindowUS = DefaultWindowUS
	}
	switch {
	case cfg.Sample >= 1:
		g.thresh = math.MaxUint64
	case cfg.Sample > 0:
		g.thresh = uint64(cfg.Sample * (1 << 63) * 2)
	}
}

// sampled decides, from the request id alone (so the sample does not
// depend on the order of events), whether its routing is replayed.
func (g *regretState) sampled(id string) bool {
	if g.thresh == 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return rng.Mix64(h.Sum64()^rng.Mix64(g.cfg.Seed^0x7265677265740000)) < g.thresh
}

// wants reports whether st's routing decision (its first) is replayed.
func (g *regretState) wants(st *request.State) bool {
	return st.Req.Kind == trace.KindLLM && st.Routed == trace.Null && g.sampled(st.Req.ID)
}

// counterfactual replays the routing decision d about st, in progress in
// the cluster (chosen: the policy's candidate; cands: the candidates'
// cluster-wide replica indices), with each of its top-k candidates forced:
// the request's TTFT, and the mean TTFT of the window's requests (those on
// the candidate replicas without a first token at the decision, and the
// request, each censored at the window's end), under each. A fork's router
// takes no more requests (cluster.StopArrivals), the same for every
// candidate.
//
// When the cluster is separable (cluster.Separable) the replicas do not
// affect each other in a replay, so each candidate replica is replayed
// alone, without the request and with it (2k one-replica replays instead
// of k whole clusters), and the window's numbers are put together from
// them: under candidate j, replica j's requests as they fare with the
// request, every other candidate's as they fare without it. The result is
// the same as whole-cluster forks' (a test checks it). An autoscaled
// cluster is separable only until its autoscaler may act
// (cluster.SeparableUntil): a sample whose one-replica replays are not
// settled by then is replayed again with whole-cluster forks.
func (r *Recorder) counterfactual(d *trace.Decision, st *request.State, chosen int, cands []int32) {
	g := &r.regret
	idx := r.candIndex(chosen)
	if len(idx) < 2 {
		r.stats.RegretNoAlternative++
		return
	}
	k := len(idx)
	t0, W := d.TimeUS, g.cfg.WindowUS
	end, lim := t0+W, t0+4*W
	arr := st.Req.ArrivalUS
	g.alone, g.with, g.nwin = resize(g.alone, k), resize(g.with, k), resize(g.nwin, k)
	g.rwin, g.ttft, g.gidx = resize(g.rwin, k), resize(g.ttft, k), resize(g.gidx, k)
	for j, vi := range idx {
		g.gidx[j] = cands[vi]
	}
	c := r.c
	n := 0 // window requests, the request aside
	ok := false
	if until := c.SeparableUntil(); until > t0 && !wholeForks {
		var done bool
		if n, done, ok = r.restricted(st, arr, end, lim, until-1); !done {
			return // a fork failed
		}
		if ok {
			g.restrictedN++
		} else {
			g.cutN++
		}
	}
	if !ok {
		for j, vi := range idx {
			f, fr := c.Fork(&g.arena, vi)
			g.collect(f, fr, g.gidx...)
			n = len(g.win)
			if !r.replay(f, fr, end, st) {
				return
			}
			g.with[j] = g.winSum(end)
			g.rwin[j] = censor(fr.FirstTok, end) - arr
			if g.ttft[j] = r.firstToken(f, fr, lim); g.ttft[j] == trace.Null {
				g.ttft[j] = lim
			}
			g.ttft[j] -= arr
		}
	}
	clear(g.win) // no fork survives the sample
	g.win = g.win[:0]
	best, bestW := int64(math.MaxInt64), math.Inf(1)
	for j := range idx {
		c := &d.Candidates[j]
		c.CFTTFTUS = g.ttft[j]
		c.CFWindowTTFTUS = float64(g.with[j]+g.rwin[j]) / float64(n+1)
		if j > 0 {
			best = min(best, c.CFTTFTUS)
			bestW = math.Min(bestW, c.CFWindowTTFTUS)
		}
	}
	d.RegretUS = d.Candidates[0].CFTTFTUS - best
	d.WindowRegretUS = d.Candidates[0].CFWindowTTFTUS - bestW
	g.n++
	g.sum += float64(d.RegretUS)
	g.wsum += d.WindowRegretUS
	if d.RegretUS > 0 {
		g.pos++
	}
}

// restricted replays the sample with one-replica forks (g.gidx the
// candidates), which are exact up to last (cluster.SeparableUntil, less
// one): it returns the window's requests (the request aside), whether
// the forks ran (false: one failed, and failed the run), and whether
// every number was settled by last (false: the caller replays whole
// clusters, an autoscaler may act before the replays are done).
func (r *Recorder) restricted(st *request.State, arr, end, lim, last int64) (n int, done, ok bool) {
	g := &r.regret
	c := r.c
	for j, gi := range g.gidx {
		f, _ := c.ForkReplica(&g.arena, gi, false)
		g.collect(f, nil, gi)
		g.nwin[j] = len(g.win)
		n += len(g.win)
		if len(g.win) > 0 {
			if !r.replay(f, nil, min(end, last), st) {
				return 0, false, false
			}
			if last < end && !r.windowDone(nil) {
				return 0, true, false
			}
			g.alone[j] = g.winSum(end)
		}
		f, fr := c.ForkReplica(&g.arena, gi, true)
		g.collect(f, fr, gi)
		if !r.replay(f, fr, min(end, last), st) {
			return 0, false, false
		}
		if last < end && !r.windowDone(fr) {
			return 0, true, false
		}
		g.with[j] = g.winSum(end)
		g.rwin[j] = censor(fr.FirstTok, end) - arr
		if g.ttft[j] = r.firstToken(f, fr, min(lim, last)); g.ttft[j] == trace.Null {
			if last < lim && fr.Phase != request.Done {
				return 0, true, false
			}
			g.ttft[j] = lim // censored: a lower bound
		}
		g.ttft[j] -= arr
	}
	var all int64
	for j := range g.gidx {
		all += g.alone[j]
	}
	for j := range g.gidx {
		g.with[j] += all - g.alone[j]
	}
	return n, true, true
}

// wholeForks makes every replay a whole-cluster fork (a test compares the
// two ways).
var wholeForks bool

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// censor bounds a first-token time by the window's end (none: the end).
func censor(ft, end int64) int64 {
	if ft == trace.Null || ft > end {
		return end
	}
	return ft
}

// collect gathers fork f's window requests: those on the replicas reps
// without a first token (LLM requests routed there, queued or running),
// the fork's copy of the decision's request (fr) aside.
func (g *regretState) collect(f *cluster.Cluster, fr *request.State, reps ...int32) {
	g.win = g.win[:0]
	f.EachLive(func(s *request.State) {
		if s == fr || s.Req.Kind != trace.KindLLM || s.FirstTok != trace.Null {
			return
		}
		switch s.Phase {
		case request.Routed, request.Waiting, request.Running, request.Transfer:
		default:
			return
		}
		if slices.Contains(reps, s.Replica) {
			g.win = append(g.win, winReq{s, s.Req.ArrivalUS})
		}
	})
}

// winSum is Σ TTFT of the window's requests, each censored at end.
func (g *regretState) winSum(end int64) int64 {
	var sum int64
	for _, w := range g.win {
		sum += censor(w.s.FirstTok, end) - w.arr
	}
	return sum
}

// replay runs a fork up to end, or until every request of the window (and
// fr) has its first token (nothing after that changes the window's
// numbers): most replays stop long before end. A fork that fails fails
// the run (a fork replays what the run itself did).
func (r *Recorder) replay(f *cluster.Cluster, fr *request.State, end int64, st *request.State) bool {
	for {
		for k := 0; k < 32; k++ {
			switch f.Step(end) {
			case cluster.Idle:
				return r.forkErr(f, st)
			case cluster.NeedInput:
				f.InputDone()
			}
		}
		if !r.forkErr(f, st) {
			return false
		}
		if r.windowDone(fr) {
			return true
		}
	}
}

func (r *Recorder) forkErr(f *cluster.Cluster, st *request.State) bool {
	if err := f.Err(); err != nil {
		r.fail(fmt.Errorf("counterfactual replay of request %s: %w", st.Req.ID, err))
		return false
	}
	return true
}

func (r *Recorder) windowDone(fr *request.State) bool {
	if fr != nil && fr.FirstTok == trace.Null && fr.Phase != request.Done {
		return false
	}
	for _, w := range r.regret.win {
		if w.s.FirstTok == trace.Null && w.s.Phase != request.Done {
			return false
		}
	}
	return true
}

// firstToken steps f until its request fr has its first token (its time)
// or the limit passes (trace.Null).
func (r *Recorder) firstToken(f *cluster.Cluster, fr *request.State, limit int64) int64 {
	for fr.FirstTok == trace.Null && fr.Phase != request.Done {
		switch f.Step(limit) {
		case cluster.Idle:
			return fr.FirstTok
		case cluster.NeedInput:
			f.InputDone()
		}
	}
	return fr.FirstTok
}

// CheckClonable reports an error when regret is sampled but the run's
// policies were supplied by the caller, are not all policy.Cloner and
// come with no Options.Fork (a policy bundle has one): a fork would share
// their state with the original run and change its decisions.
func CheckClonable(r *Recorder, opts *cluster.Options) error {
	pol := &opts.Policies
	if r == nil || r.cfg.Regret.Sample <= 0 || pol.Fork != nil {
		return nil // a policy bundle forks its own state (Policies.Fork)
	}
	for _, p := range []any{pol.Admission, pol.Priority, pol.Routing} {
		if p == nil {
			continue
		}
		if _, ok := p.(policy.Cloner); !ok {
			return fmt.Errorf("--regret-sample: the run's %T policy cannot be cloned, so a counterfactual fork would share (and change) its state; regret with policy bundles waits for cloneable bundles (docs/policies.md)", p)
		}
	}
	// (Err alone is a stop hook, shared with the forks harmlessly: a
	// wall-clock budget stops them too.)
	if pol.Scheduling != nil {
		return errors.New("--regret-sample: the run's policy bundle keeps state a counterfactual fork cannot clone yet (docs/policies.md); drop --regret-sample")
	}
	return nil
}
