package synth

import (
	"container/heap"
	"math"
	"strconv"

	blisrng "github.com/blis-sim/blis/lib/rng"

	"github.com/blis-sim/blis/lib/trace"
)

// Stats counts what a run produced, per client in spec order.
type Stats struct {
	Rows, Sessions int64
	ClientRows     []int64
	ClientSessions []int64
	ToolRows       int64
}

// Emit receives each row; the row and its slices are reused after it returns.
type Emit func(r *trace.Request) error

// seg is a run of prompt tokens with one content identity.
type seg struct {
	id uint64
	n  int32
}

// inst is one emitted instance of a workflow step.
type inst struct {
	id    string
	out   seg
	inCtx bool
}

type clientGen struct {
	c         *Client
	idx       int
	arr, lens rng
	pfx, ses  rng
	a         *arrivals
	next      int64
	regular   int64 // next arrival of the base process (-1: ended)
	bursts    burstHeap
	burstN    int32 // sessions in the burst the current arrival belongs to (1: none)
	done      bool
	seq       int64
	nameHash  uint64
	groups    []int
	gcum      []float64
	reuse     float64
	stream    float64
	idBuf     []byte
	cur       [][]inst // per plan step: instances of the latest iteration

	// Issue-19 streams, created only for the clients that use the feature,
	// so a spec without it keeps every other stream's draws.
	rs, mm, corr, convRNG, prioRNG, loraRNG rng
	lastSys                                 seg
	hasLast                                 bool
	syncA                                   *arrivals // synchronized_burst attack: its burst clock
	syncRNG                                 rng
	syncNext                                int64 // next attack burst arrival (-1: none)
	syncN                                   int32
	sessMean                                float64 // output_spread: the session's own mean answer length
}

type user struct {
	terms   []string
	started bool
}

// Generator synthesises a spec's requests in the order of the sorted-arrival promise.
type Generator struct {
	s       *Spec
	cs      []*clientGen
	emit    Emit
	st      Stats
	req     trace.Request
	deps    []string
	hs      hasher
	segs    []seg
	ctx     []seg
	term    []string
	back    []string
	users   []user
	userRNG rng
	nsess   int64
	segBase uint64 // content ids of the current session's segments
	nseg    uint64
	// Per-session values the rows copy.
	prio  int32
	lora  string // the session's LoRA adapter ("" = base model)
	rtype string
	nimg  int32 // images in the next row's prompt (images() sets it, row() clears it)
}

// newSeg returns a fresh prompt segment of n tokens, unique to its session.
func (g *Generator) newSeg(n int32) seg {
	g.nseg++
	return seg{id: blisrng.Mix64(g.segBase + 0x9e3779b97f4a7c15*g.nseg), n: n}
}

// Generate writes every row of the spec to emit and returns what it wrote.
func Generate(s *Spec, emit Emit) (Stats, error) {
	g := newGenerator(s, emit)
	return g.st, g.run()
}

func newGenerator(s *Spec, emit Emit) *Generator {
	g := &Generator{s: s, emit: emit, hs: hasher{bs: s.PrefixBlockSize}}
	g.st.ClientRows = make([]int64, len(s.Clients))
	g.st.ClientSessions = make([]int64, len(s.Clients))
	fractions, weights := 0.0, 0.0
	for _, c := range s.Clients {
		if c.RateFraction != nil {
			fractions += *c.RateFraction
		} else if c.Weight != nil {
			weights += *c.Weight
		} else {
			weights++
		}
	}
	for i, c := range s.Clients {
		var share float64
		switch {
		case c.RateFraction != nil:
			share = *c.RateFraction
		case c.Weight != nil:
			share = (1 - fractions) * *c.Weight / weights
		default:
			share = (1 - fractions) / weights
		}
		rate := s.AggregateRate * share
		if c.Behaviour.Type == "abusive" {
			rate *= c.Behaviour.RateMultiplier
		}
		pre := "client/" + c.Name + "/"
		cg := &clientGen{c: c, idx: i, arr: newRNG(s.Seed, pre+"arrival"), lens: newRNG(s.Seed, pre+"lengths"),
			pfx: newRNG(s.Seed, pre+"prefix"), ses: newRNG(s.Seed, pre+"session"),
			nameHash: hashString(c.Name), stream: 1}
		cg.a = newArrivals(c, rate)
		if c.Streaming != nil {
			cg.stream = *c.Streaming
		}
		if c.Prefix != nil {
			cg.reuse = 1
			if c.Prefix.ReuseProbability != nil {
				cg.reuse = *c.Prefix.ReuseProbability
			}
			names := c.Prefix.Groups
			total := 0.0
			for j, pg := range s.PrefixGroups {
				use := len(names) == 0
				for _, n := range names {
					use = use || n == pg.Name
				}
				if use {
					total += pg.Weight
					cg.groups = append(cg.groups, j)
					cg.gcum = append(cg.gcum, total)
				}
			}
		}
		if c.plan != nil {
			cg.cur = make([][]inst, len(c.plan.steps))
		}
		if c.Reasoning != nil {
			cg.rs = newRNG(s.Seed, pre+"reasoning")
		}
		if c.Multimodal != nil {
			cg.mm = newRNG(s.Seed, pre+"multimodal")
		}
		if c.Correlation != nil {
			cg.corr = newRNG(s.Seed, pre+"correlation")
		}
		if c.ConversationalProbability != nil {
			cg.convRNG = newRNG(s.Seed, pre+"conversational")
		}
		if c.Priority != nil && !c.Priority.constant {
			cg.prioRNG = newRNG(s.Seed, pre+"priority")
		}
		if c.LoRA != nil {
			cg.loraRNG = newRNG(s.Seed, pre+"lora")
		}
		cg.syncNext = -1
		if b := c.Behaviour; b.syncArrival != nil {
			cg.syncA = &arrivals{kind: "synchronized", sync: b.syncArrival}
			cg.syncRNG = newRNG(s.Seed, pre+"attack")
			cg.nextAttackBurst()
		}
		if t, ok := cg.a.next(cg.arr); ok {
			cg.regular = t
		} else {
			cg.regular = -1
		}
		cg.advance()
		g.cs = append(g.cs, cg)
	}
	if s.Mode == ModeConcurrency {
		g.users = make([]user, s.Concurrency)
		g.userRNG = newRNG(s.Seed, "concurrency/think_time")
	}
	return g
}

// advance picks the client's next root time from its base process and pending bursts.
func (cg *clientGen) advance() {
	if cg.syncNext >= 0 && (cg.regular < 0 || cg.syncNext < cg.regular) && (len(cg.bursts) == 0 || cg.syncNext < cg.bursts[0].t) {
		cg.next, cg.burstN = cg.syncNext, cg.syncN
		cg.nextAttackBurst()
		return
	}
	switch {
	case cg.regular < 0 && len(cg.bursts) == 0:
		cg.done = true
	case len(cg.bursts) > 0 && (cg.regular < 0 || cg.bursts[0].t < cg.regular):
		b := heap.Pop(&cg.bursts).(burst)
		cg.next, cg.burstN = b.t, b.n
	default:
		cg.next, cg.burstN = cg.regular, 1
		// A base arrival may start a burst: the rest of the burst follows at burst_interval.
		if b := cg.c.Behaviour; b.Type == "bursty" && cg.arr.r.Float64() < b.BurstProbability {
			n := b.BurstSize.count(cg.arr, 100000)
			cg.burstN = int32(n)
			for k := 1; k < n; k++ {
				heap.Push(&cg.bursts, burst{cg.next + int64(k)*int64(b.BurstInterval), int32(n)})
			}
		}
		if t, ok := cg.a.next(cg.arr); ok {
			cg.regular = t
		} else {
			cg.regular = -1
		}
	}
}

func (g *Generator) run() error {
	s := g.s
	for {
		var cg *clientGen
		for _, c := range g.cs {
			if !c.done && (cg == nil || c.next < cg.next) {
				cg = c
			}
		}
		if cg == nil {
			return nil
		}
		if s.NumRequests > 0 && g.st.Rows >= s.NumRequests {
			return nil
		}
		if s.Mode == ModeRate && s.Horizon > 0 && cg.next >= int64(s.Horizon) {
			cg.done = true // its later arrivals are later still
			continue
		}
		t := cg.next
		if s.Mode != ModeRate {
			t = 0
		}
		if err := g.session(cg, t); err != nil {
			return err
		}
		cg.advance()
	}
}

// root describes how a session's first row starts: at an arrival time, or
// (closed loop) after the virtual user's previous session.
type root struct {
	arrival int64
	deps    []string
	delay   int64
	session string
}

func (g *Generator) session(cg *clientGen, t int64) error {
	c := cg.c
	seq := cg.seq
	cg.seq++
	g.st.Sessions++
	g.st.ClientSessions[cg.idx]++
	cg.idBuf = append(append(cg.idBuf[:0], c.Name...), '-')
	cg.idBuf = strconv.AppendInt(cg.idBuf, seq, 10)
	base := len(cg.idBuf)
	rt := root{arrival: t}
	if c.Agentic != nil {
		rt.session = string(cg.idBuf)
	}
	var u *user
	if g.users != nil {
		u = &g.users[g.nsess%int64(len(g.users))]
		g.nsess++
		rt.session = "vu" + strconv.FormatInt((g.nsess-1)%int64(len(g.users)), 10)
		if u.started {
			rt.arrival = trace.Null
			rt.deps = u.terms
			if g.s.ThinkTime != nil {
				rt.delay = g.s.ThinkTime.micros(g.userRNG)
			}
		}
		u.started = true
	}
	streaming := cg.stream >= 1 || (cg.stream > 0 && cg.lens.r.Float64() < cg.stream)
	// System prompt: a shared group's content, or a private prompt of the same length.
	g.segs = g.segs[:0]
	var sys seg
	if len(cg.groups) > 0 {
		if cr := c.Correlation; cr != nil && cr.Prefix != nil && cg.hasLast && cg.corr.r.Float64() < *cr.Prefix {
			sys = cg.lastSys // intra-tenant prefix correlation: keep the previous session's prompt
		} else {
			j := cg.groups[pick(cg.gcum, cg.pfx.r.Float64())]
			pg := &g.s.PrefixGroups[j]
			sys = seg{id: hashString("group/" + pg.Name), n: int32(pg.Length)}
			if cg.reuse < 1 && cg.pfx.r.Float64() >= cg.reuse {
				sys.id = blisrng.Mix64(cg.nameHash ^ blisrng.Mix64(uint64(seq)) ^ 0x5157)
			}
		}
		cg.lastSys, cg.hasLast = sys, true
	}
	g.prio = c.prio
	g.lora = ""
	if c.LoRA != nil {
		g.lora = c.LoRA.draw(cg.loraRNG)
	}
	if c.Priority != nil && !c.Priority.constant {
		g.prio = int32(math.Round(c.Priority.Sample(cg.prioRNG)))
	}
	cv := c.Conversation
	inD, outD := c.Input, c.Output
	if b := c.Behaviour; b.Type == "adversarial" && b.inAttack(t) {
		if b.Input != nil {
			inD = b.Input
		}
		if b.Output != nil {
			outD = b.Output
		}
		if b.attackConv != nil {
			cv = b.attackConv
		}
	}
	if cv != nil && cv == c.Conversation && c.ConversationalProbability != nil && cg.convRNG.r.Float64() >= *c.ConversationalProbability {
		cv = nil // this session is a single request
	}
	if cv != nil && u == nil {
		rt.session = string(cg.idBuf)
	}
	g.rtype = c.requestType(cv != nil)
	if cr := c.Correlation; cr != nil && cr.OutputSpread != nil {
		cg.sessMean = outD.Sample(cg.lens)
	}
	g.segBase, g.nseg = cg.nameHash+blisrng.Mix64(uint64(seq)), 0
	g.term = g.term[:0]
	switch {
	case c.Agentic != nil:
		if err := g.workflow(cg, rt, sys, streaming, base); err != nil {
			return err
		}
	case cv != nil:
		turns := cv.Turns.count(cg.ses, maxTurns)
		acc := cv.ContextGrowth == "accumulate"
		g.ctx = g.ctx[:0]
		var prev string
		for k := 0; k < turns; k++ {
			in := g.newSeg(g.promptTokens(cg, inD, k))
			out := g.answerTokens(cg, outD)
			g.segs = g.segs[:0]
			if sys.n > 0 {
				g.segs = append(g.segs, sys)
			}
			if acc {
				g.segs = append(g.segs, g.ctx...)
			}
			img := g.images(cg)
			if img.n > 0 {
				g.segs = append(g.segs, img)
			}
			g.segs = append(g.segs, in)
			cg.idBuf = append(cg.idBuf[:base], "-t"...)
			cg.idBuf = strconv.AppendInt(cg.idBuf, int64(k), 10)
			id := string(cg.idBuf)
			var err error
			if k == 0 {
				err = g.row(cg, id, rt.arrival, rt.deps, rt.delay, trace.KindLLM, out, "turn", 0, streaming, rt.session)
			} else {
				g.deps = append(g.deps[:0], prev)
				var think int64
				if cv.ThinkTime != nil {
					think = cv.ThinkTime.micros(cg.ses)
				}
				err = g.row(cg, id, trace.Null, g.deps, think, trace.KindLLM, out, "turn", int32(k), streaming, rt.session)
			}
			if err != nil {
				return err
			}
			if acc {
				if img.n > 0 {
					g.ctx = append(g.ctx, img)
				}
				g.ctx = append(g.ctx, in, g.newSeg(out))
			}
			prev = id
		}
		g.term = append(g.term, prev)
	default:
		if sys.n > 0 {
			g.segs = append(g.segs, sys)
		}
		newTok := g.promptTokens(cg, inD, 0)
		if img := g.images(cg); img.n > 0 {
			g.segs = append(g.segs, img)
		}
		g.segs = append(g.segs, g.newSeg(newTok))
		id := string(cg.idBuf)
		if err := g.row(cg, id, rt.arrival, rt.deps, rt.delay, trace.KindLLM, g.answerTokens(cg, outD), "", 0, streaming, rt.session); err != nil {
			return err
		}
		g.term = append(g.term, id)
	}
	if u != nil {
		u.terms = append(u.terms[:0], g.term...)
	}
	return nil
}

// inputTokens draws a prompt's new tokens, oversized for an abusive tenant.
func (g *Generator) inputTokens(cg *clientGen, d *Dist) int32 {
	n := d.tokens(cg.lens)
	if b := cg.c.Behaviour; b.Type == "abusive" && b.OversizeProbability > 0 && cg.lens.r.Float64() < b.OversizeProbability {
		n = int32(math.Min(float64(n)*b.OversizeFactor, math.MaxInt32/4))
	}
	return n
}

// promptTokens draws turn k's new prompt tokens: inputTokens, then scaled
// by the burst-size correlation and the per-turn growth rate.
func (g *Generator) promptTokens(cg *clientGen, d *Dist, k int) int32 {
	n := g.inputTokens(cg, d)
	cr := cg.c.Correlation
	if cr == nil {
		return n
	}
	f := 1.0
	if cr.BurstSize != nil && cg.burstN > 1 {
		f *= math.Pow(float64(cg.burstN), *cr.BurstSize)
	}
	if cr.PromptGrowth != nil && k > 0 {
		f *= math.Pow(1+*cr.PromptGrowth, float64(k))
	}
	if f == 1 {
		return n
	}
	return int32(math.Max(1, math.Min(math.Round(float64(n)*f), math.MaxInt32/4)))
}

// answerTokens draws an answer: around the session's own mean when
// output_spread is set, plus the reasoning chain of a reasoning client.
func (g *Generator) answerTokens(cg *clientGen, d *Dist) int32 {
	c := cg.c
	var n int32
	if cr := c.Correlation; cr != nil && cr.OutputSpread != nil {
		sd := *cr.OutputSpread
		x := cg.sessMean * math.Exp(sd*cg.corr.r.NormFloat64()-sd*sd/2)
		n = int32(math.Max(1, math.Min(math.Round(math.Min(x, d.hi)), math.MaxInt32/4)))
	} else {
		n = d.tokens(cg.lens)
	}
	if r := c.Reasoning; r != nil {
		steps := r.ChainLength.count(cg.rs, 1_000_000)
		total := int64(n)
		if r.TokensPerStep.constant {
			total += int64(steps) * int64(r.TokensPerStep.tokens(cg.rs))
		} else {
			for i := 0; i < steps && total < math.MaxInt32/4; i++ {
				total += int64(r.TokensPerStep.tokens(cg.rs))
			}
		}
		n = int32(min(total, math.MaxInt32/4))
	}
	return n
}

// images draws a multimodal prompt's images: a fresh segment of their
// tokens (empty when none), and the count for the row.
func (g *Generator) images(cg *clientGen) seg {
	m := cg.c.Multimodal
	if m == nil {
		return seg{}
	}
	n := int64(math.Round(m.Images.Sample(cg.mm)))
	if n <= 0 {
		return seg{}
	}
	n = min(n, 100000)
	var tok int64
	for i := int64(0); i < n; i++ {
		tok += int64(m.TokensPerImage.tokens(cg.mm))
	}
	g.nimg = int32(n)
	return g.newSeg(int32(min(tok, math.MaxInt32/4)))
}

// workflow expands an agentic plan into rows: steps before the loop, the loop
// body per iteration (its entries wait for the previous iteration's exits),
// then the steps after it.
func (g *Generator) workflow(cg *clientGen, rt root, sys seg, streaming bool, base int) error {
	pl := cg.c.plan
	for i := range cg.cur {
		cg.cur[i] = cg.cur[i][:0]
	}
	g.ctx = g.ctx[:0]
	iters := 1
	if pl.loopEnd > pl.loopStart {
		iters = pl.maxIter
		if pl.iters != nil {
			iters = pl.iters.count(cg.ses, pl.maxIter)
		}
	}
	emitStep := func(si, it int) error {
		st := pl.steps[si]
		entry := it > 0 && isEntry(pl, si)
		fresh := cg.cur[si][:0]
		for k := 0; k < st.fan; k++ {
			g.deps = g.deps[:0]
			g.segs = g.segs[:0]
			if st.tool == nil && sys.n > 0 {
				g.segs = append(g.segs, sys)
			}
			if st.accumulate {
				g.segs = append(g.segs, g.ctx...)
			}
			ctxStart := len(g.segs)
			for _, q := range st.parents {
				pq := cg.cur[q]
				if q == si { // cannot happen: no self edges
					continue
				}
				for j := range pq {
					if pl.steps[q].fan == st.fan && st.fan > 1 && j != k {
						continue
					}
					g.deps = append(g.deps, pq[j].id)
					if st.tool == nil && pq[j].out.n > 0 && !(st.accumulate && pq[j].inCtx) {
						g.segs = append(g.segs, pq[j].out)
						if st.accumulate {
							pq[j].inCtx = true
						}
					}
				}
			}
			if entry {
				g.deps = append(g.deps, g.back...)
			}
			cg.idBuf = append(append(cg.idBuf[:base], '-'), st.id...)
			if st.inLoop {
				cg.idBuf = append(cg.idBuf, "-i"...)
				cg.idBuf = strconv.AppendInt(cg.idBuf, int64(it), 10)
			}
			if st.fan > 1 {
				cg.idBuf = append(cg.idBuf, "-f"...)
				cg.idBuf = strconv.AppendInt(cg.idBuf, int64(k), 10)
			}
			id := string(cg.idBuf)
			arrival, deps, delay := trace.Null, []string(g.deps), int64(0)
			if len(g.deps) == 0 {
				arrival, deps, delay = rt.arrival, rt.deps, rt.delay
			}
			var out seg
			var err error
			if st.tool != nil {
				lat := st.tool.Latency.micros(cg.ses)
				var n int32
				if st.tool.OutputTokens != nil {
					n = int32(math.Round(math.Max(0, st.tool.OutputTokens.Sample(cg.lens))))
				}
				out = g.newSeg(n)
				g.segs = g.segs[:0]
				err = g.row(cg, id, arrival, deps, delay+lat, trace.KindTool, 0, st.id, int32(it), false, rt.session)
			} else {
				in := g.newSeg(g.inputTokens(cg, st.in))
				g.segs = append(g.segs, in)
				n := st.out.tokens(cg.lens)
				out = g.newSeg(n)
				if st.accumulate {
					g.ctx = append(g.ctx, g.segs[ctxStart:]...)
					g.ctx = append(g.ctx, out)
				}
				err = g.row(cg, id, arrival, deps, delay, trace.KindLLM, n, st.id, int32(it), streaming, rt.session)
			}
			if err != nil {
				return err
			}
			fresh = append(fresh, inst{id: id, out: out, inCtx: st.accumulate})
		}
		cg.cur[si] = fresh
		return nil
	}
	for si := 0; si < pl.loopStart; si++ {
		if err := emitStep(si, 0); err != nil {
			return err
		}
	}
	for it := 0; it < iters && pl.loopEnd > pl.loopStart; it++ {
		g.back = g.back[:0]
		if it > 0 {
			for _, e := range pl.exits {
				for _, in := range cg.cur[e] {
					g.back = append(g.back, in.id)
				}
			}
		}
		for si := pl.loopStart; si < pl.loopEnd; si++ {
			if err := emitStep(si, it); err != nil {
				return err
			}
		}
	}
	for si := pl.loopEnd; si < len(pl.steps); si++ {
		if err := emitStep(si, 0); err != nil {
			return err
		}
	}
	for si, st := range pl.steps {
		if st.terminal {
			for _, in := range cg.cur[si] {
				g.term = append(g.term, in.id)
			}
		}
	}
	return nil
}

func isEntry(pl *plan, si int) bool {
	for _, e := range pl.entries {
		if e == si {
			return true
		}
	}
	return false
}

// LimitError is a spec that passed validation but whose samples broke a hard
// limit while generating: bad input, like a validation error.
type LimitError struct{ Err error }

func (e *LimitError) Error() string { return e.Err.Error() }
func (e *LimitError) Unwrap() error { return e.Err }

// BadInput marks the error as bad input (exit status 2; see lib/badinput).
func (e *LimitError) BadInput() bool { return true }

// MaxPromptTokens bounds a synthesised prompt (accumulated context included).
const MaxPromptTokens = 1 << 24

// row fills the reused request from the current prompt segments and emits it.
func (g *Generator) row(cg *clientGen, id string, arrival int64, deps []string, delay int64, kind string, out int32, step string, iter int32, streaming bool, session string) error {
	c := cg.c
	r := &g.req
	var in int64
	for _, sg := range g.segs {
		in += int64(sg.n)
	}
	if in > MaxPromptTokens {
		return &LimitError{g.s.errAt(path{"clients", cg.idx},
			"client %q: request %s: its prompt grew to %d tokens, above the limit of %d (fewer turns or iterations, or bounded lengths with max:, keep prompts realistic)", c.Name, id, in, MaxPromptTokens)}
	}
	hashes := g.hs.hash(g.segs)
	*r = trace.Request{
		ID: id, ArrivalUS: arrival, DependsOn: deps, DelayUS: delay, Kind: kind,
		InputTokens: int32(in), OutputTokens: out, PrefixHashes: hashes, SessionID: session,
		TenantID: c.TenantID, SLOClass: c.SLOClass, Model: c.Model, Priority: g.prio,
		StepID: step, LoopIteration: iter, Streaming: streaming,
		RecordedTTFTUS: trace.Null, RecordedE2EUS: trace.Null, RecordedITLUS: trace.Null,
		RequestType: g.rtype, NumImages: g.nimg, LoRA: g.lora,
	}
	if g.nimg > 0 && c.RequestType == "" {
		r.RequestType = trace.TypeMultimodal
	}
	g.nimg = 0
	if kind == trace.KindLLM {
		r.TimeoutUS = int64(c.Timeout) // tools are timers: no client waits on them
	}
	g.st.Rows++
	g.st.ClientRows[cg.idx]++
	if kind == trace.KindTool {
		g.st.ToolRows++
	}
	return g.emit(r)
}

// hasher computes prefix_hashes: one hash per block (the last may be
// partial), each chaining the previous block's hash with the block's content
// (which segments and offsets it covers), so prompts that share leading
// content share leading hashes and a partial block never equals a full one.
// It remembers the previous prompt and resumes after the full blocks they
// share, so a growing conversation costs O(new tokens) per turn.
type hasher struct {
	bs     int
	segs   []seg
	hashes []uint64
}

const hashSeed = 0x6a09e667f3bcc908

func (hs *hasher) hash(segs []seg) []uint64 {
	if len(segs) == 0 {
		return nil
	}
	bs := hs.bs
	i, tok := 0, 0
	for i < len(segs) && i < len(hs.segs) && segs[i] == hs.segs[i] {
		tok += int(segs[i].n)
		i++
	}
	keep := min(tok/bs, len(hs.hashes))
	out := hs.hashes[:keep]
	h := uint64(0)
	if keep > 0 {
		h = out[keep-1]
	}
	// Find the segment and offset where block keep starts.
	start, si, off := keep*bs, 0, 0
	for si < len(segs) && start >= int(segs[si].n) {
		start -= int(segs[si].n)
		si++
	}
	off = start
	c, filled := uint64(hashSeed), 0
	for ; si < len(segs); si++ {
		sg := segs[si]
		for n := int(sg.n); off < n; {
			take := min(bs-filled, n-off)
			c = blisrng.Mix64(c ^ sg.id ^ (uint64(off)<<32|uint64(take))*0x9e3779b97f4a7c15)
			filled += take
			off += take
			if filled == bs {
				h = blisrng.Mix64(h*0x9e3779b97f4a7c15 ^ c)
				out = append(out, h)
				c, filled = hashSeed, 0
			}
		}
		off = 0
	}
	if filled > 0 {
		h = blisrng.Mix64(h*0x9e3779b97f4a7c15 ^ c)
		out = append(out, h)
	}
	hs.segs = append(hs.segs[:0], segs...)
	hs.hashes = out
	return out
}

// hashString is FNV-1a, mixed: stable across processes (unlike maphash).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return blisrng.Mix64(h)
}

// burst is a pending arrival of a burst of n sessions.
type burst struct {
	t int64
	n int32
}

type burstHeap []burst

func (h burstHeap) Len() int           { return len(h) }
func (h burstHeap) Less(i, j int) bool { return h[i].t < h[j].t }
func (h burstHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *burstHeap) Push(x any)        { *h = append(*h, x.(burst)) }
func (h *burstHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
