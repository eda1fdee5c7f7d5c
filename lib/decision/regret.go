package decision

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
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
	cfg      *RegretConfig
	fork     *cluster.Cluster
	id       string
	n, pos   int64
	sum      float64
	wsum     float64
	collect  forkSink
	setIDs   []string
	setArr   []int64
	thresh   uint64
	disabled bool
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
	g.collect.first = map[string]int64{}
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

func (g *regretState) pending(st *request.State) bool { return g.fork != nil && g.id == st.Req.ID }

func (g *regretState) drop() { g.fork = nil }

// BeforeArrival forks the cluster before a sampled request's first
// routing (cluster.Forker).
func (r *Recorder) BeforeArrival(c *cluster.Cluster, st *request.State) {
	r.regret.fork = nil
	if st.Req.Kind != trace.KindLLM || st.Routed != trace.Null || !r.regret.sampled(st.Req.ID) {
		return
	}
	r.regret.fork, r.regret.id = c.Clone(nil, nil), st.Req.ID
}

// forkSink keeps the first-token times of the window's requests.
type forkSink struct{ first map[string]int64 }

func (s *forkSink) Write(res *trace.Result) error {
	if _, ok := s.first[res.ID]; ok {
		s.first[res.ID] = res.FirstTokenUS
	}
	return nil
}

// counterfactual replays the decision d (about st) with each of its top-k
// candidates forced, from the fork taken before the request arrived: the
// request's TTFT, and the mean TTFT of the window's requests (those in the
// cluster without a first token at the decision, the request included,
// each censored at the window's end), under each. Arrivals after the
// decision are not replayed (the fork gets no more input), the same for
// every candidate.
func (r *Recorder) counterfactual(d *trace.Decision, st *request.State, chosen int) {
	g := &r.regret
	base := g.fork
	g.fork = nil
	idx := r.candIndex(chosen)
	if len(idx) < 2 {
		return
	}
	t0, W := d.TimeUS, g.cfg.WindowUS
	end := t0 + W
	g.setIDs, g.setArr = g.setIDs[:0], g.setArr[:0]
	base.EachLive(func(s *request.State) {
		if s.Req.Kind != trace.KindLLM || s.FirstTok != trace.Null || s.Phase == request.Pending || s.Phase == request.Done {
			return
		}
		if a := s.Req.ArrivalUS; a != trace.Null && a <= end {
			g.setIDs = append(g.setIDs, s.Req.ID)
			g.setArr = append(g.setArr, a)
		}
	})
	arr := st.Req.ArrivalUS
	best, bestW := int64(math.MaxInt64), math.Inf(1)
	for j, ci := range idx {
		f := base
		if j < len(idx)-1 {
			f = base.Clone(nil, nil)
		}
		clear(g.collect.first)
		for _, id := range g.setIDs {
			g.collect.first[id] = trace.Null
		}
		f.SetSink(&g.collect)
		f.ForceRoute(st.Req.ID, ci)
		if !r.runWindow(f, end) {
			return
		}
		var sum float64
		for k, id := range g.setIDs {
			ft := g.collect.first[id]
			if ft == trace.Null {
				if s := f.Request(id); s != nil && s.Req.ID == id {
					ft = s.FirstTok
				}
			}
			if ft == trace.Null || ft > end {
				ft = end
			}
			sum += float64(ft - g.setArr[k])
		}
		win := math.NaN()
		if len(g.setIDs) > 0 {
			win = sum / float64(len(g.setIDs))
		}
		// The request's own TTFT: run on (up to 4 windows) until it has one.
		ttft := r.firstToken(f, st.Req.ID, t0+4*W)
		if ttft != trace.Null {
			ttft -= arr
		} else {
			ttft = t0 + 4*W - arr // censored: a lower bound
		}
		c := &d.Candidates[j]
		c.CFTTFTUS, c.CFWindowTTFTUS = ttft, win
		if j > 0 {
			best = min(best, ttft)
			bestW = math.Min(bestW, win)
		}
	}
	d.RegretUS = d.Candidates[0].CFTTFTUS - best
	d.WindowRegretUS = d.Candidates[0].CFWindowTTFTUS - bestW
	g.n++
	g.sum += float64(d.RegretUS)
	if !math.IsNaN(d.WindowRegretUS) {
		g.wsum += d.WindowRegretUS
	}
	if d.RegretUS > 0 {
		g.pos++
	}
}

// runWindow runs a fork up to end, with no more input than it holds, or
// until every request of the window has its first token (nothing after
// that changes the window's numbers): most replays stop long before end.
func (r *Recorder) runWindow(f *cluster.Cluster, end int64) bool {
	for {
		for k := 0; k < 64; k++ {
			switch f.Step(end) {
			case cluster.Idle:
				return f.Err() == nil
			case cluster.NeedInput:
				f.InputDone()
			}
		}
		if f.Err() != nil {
			return false
		}
		if r.windowDone(f) {
			return true
		}
	}
}

func (r *Recorder) windowDone(f *cluster.Cluster) bool {
	g := &r.regret
	for _, id := range g.setIDs {
		if g.collect.first[id] != trace.Null {
			continue
		}
		if s := f.Request(id); s != nil && s.Req.ID == id && s.FirstTok == trace.Null && s.Phase != request.Done {
			return false
		}
	}
	return true
}

// firstToken steps f until request id has its first token (its time) or
// the limit passes (trace.Null).
func (r *Recorder) firstToken(f *cluster.Cluster, id string, limit int64) int64 {
	if ft, ok := r.regret.collect.first[id]; ok && ft != trace.Null {
		return ft
	}
	s := f.Request(id)
	for s != nil && s.Req.ID == id && s.FirstTok == trace.Null && s.Phase != request.Done {
		switch f.Step(limit) {
		case cluster.Idle:
			return trace.Null
		case cluster.NeedInput:
			f.InputDone()
		}
	}
	if s != nil && s.Req.ID == id && s.FirstTok != trace.Null {
		return s.FirstTok
	}
	if ft, ok := r.regret.collect.first[id]; ok {
		return ft
	}
	return trace.Null
}

// CheckClonable reports an error when regret is sampled but the run's
// policies were supplied by the caller, are not all policy.Cloner and
// come with no Options.Fork (a policy bundle has one): a fork would share
// their state with the original run and change its decisions.
func CheckClonable(r *Recorder, opts *cluster.Options) error {
	if r == nil || r.cfg.Regret.Sample <= 0 || opts.Fork != nil {
		return nil // a policy bundle forks its own state (Options.Fork)
	}
	for _, p := range []any{opts.Admission, opts.Priority, opts.Routing} {
		if p == nil {
			continue
		}
		if _, ok := p.(policy.Cloner); !ok {
			return fmt.Errorf("--regret-sample: the run's %T policy cannot be cloned, so a counterfactual fork would share (and change) its state; regret with policy bundles waits for cloneable bundles (docs/policies.md)", p)
		}
	}
	if opts.Scheduling != nil || opts.PolicyErr != nil {
		return errors.New("--regret-sample: the run's policy bundle keeps state a counterfactual fork cannot clone yet (docs/policies.md); drop --regret-sample")
	}
	return nil
}
