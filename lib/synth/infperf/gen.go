package infperf

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// BlockSize is the tokens per prefix_hashes entry: vLLM's default KV block.
const BlockSize = 16

// DefaultTimeoutS is the client's request timeout when load.request_timeout
// is not set: inference-perf then leaves aiohttp's default ClientTimeout,
// 300 s in total (connection, queueing and streaming).
const DefaultTimeoutS = 300

// Options adjust the table.
type Options struct {
	// Seed derives every random stream (arrival gaps, lengths, prompt
	// order). inference-perf draws from numpy streams seeded by the clock
	// unless base_seed is set: the same config gives a table with the same
	// statistics, not the same draws.
	Seed uint64
	// InputScale multiplies every prompt segment's length (0 = 1): older
	// inference-perf versions decoded random token ids to text and the
	// server re-tokenised it, a few percent longer (the measured prompt_len
	// of a run over the configured one).
	InputScale float64
}

// Table is the generated requests and what the table's metadata says.
type Table struct {
	Requests    []trace.Request
	MaxInFlight int      // the client's cap on requests in flight; 0 = none
	Notes       []string // what was approximated, one sentence each
	Stages      []StageInfo
}

// StageInfo describes one generated stage.
type StageInfo struct {
	Name             string
	Requests         int
	StartUS, LastUS  int64   // first possible and last scheduled send
	Rate             float64 // requested, req/s (concurrent: requests in its 1 s window)
	ConcurrencyLevel int     // concurrent stages
}

// plan is the config resolved into what generation needs.
type plan struct {
	kind        string // shared_prefix, random, synthetic
	loadType    string // constant, poisson, concurrent
	stages      []Stage
	interval    float64
	reqType     string
	streaming   bool
	timeoutUS   int64
	maxInFlight int
	sp          spPlan
	inLens      []int
	outLens     []int
	notes       []string
	seed        uint64
}

type spPlan struct {
	groups, perGroup   int
	sys, question, out lengthDist
	multiTurn          bool
}

// Generate writes the requests the config sends, stage by stage.
func (c *Config) Generate(opts Options) (*Table, error) {
	p, err := c.resolve(opts)
	if err != nil {
		return nil, err
	}
	g := &gen{p: p, scale: opts.InputScale}
	if g.scale == 0 {
		g.scale = 1
	}
	if err := g.lengths(c); err != nil {
		return nil, err
	}
	t := &Table{MaxInFlight: p.maxInFlight, Notes: p.notes}
	arr := rng.New(p.seed, "inference-perf/arrivals")
	start := 0.0 // µs
	for si, st := range p.stages {
		times, rate, level := g.stageTimes(arr, st)
		info := StageInfo{Name: fmt.Sprint(si), Requests: len(times), StartUS: int64(start), Rate: rate, ConcurrencyLevel: level}
		for k, off := range times {
			at := int64(math.Round(start + off*1e6))
			r, err := g.request(c, si, k, at)
			if err != nil {
				return nil, err
			}
			t.Requests = append(t.Requests, r)
			info.LastUS = at
		}
		t.Stages = append(t.Stages, info)
		// The next stage starts when this one has drained, interval
		// seconds later, with a second's head start for the workers.
		start += times[len(times)-1]*1e6 + (p.interval+1)*1e6
	}
	return t, nil
}

// gen holds the generation state.
type gen struct {
	p     *plan
	scale float64
	// shared_prefix: per prompt (after the shuffle) its group, question
	// and output lengths; per group the system prompt's length.
	sysLen   []int
	prompts  []promptInfo
	sessions []session // multi-turn: one per prompt, same index
	hs       hasher
}

type promptInfo struct {
	group, id int // id: the prompt's number before the shuffle (group·P + p)
	q, out    int
}

// session is a multi-turn user: its context so far (segments) and last
// request id.
type session struct {
	ctx  []seg
	last string
	n    int
}

func (g *gen) tokens(n int) int {
	if g.scale == 1 {
		return n
	}
	return max(int(math.Round(float64(n)*g.scale)), 0)
}

// lengths draws what the data generator draws before the first request.
func (g *gen) lengths(c *Config) error {
	p := g.p
	if p.kind != "shared_prefix" {
		return nil
	}
	r := rng.New(p.seed, "inference-perf/lengths")
	s := &p.sp
	g.sysLen = s.sys.sample(r, s.groups)
	for gi := 0; gi < s.groups; gi++ {
		qs := s.question.sample(r, s.perGroup)
		os := s.out.sample(r, s.perGroup)
		for k := 0; k < s.perGroup; k++ {
			g.prompts = append(g.prompts, promptInfo{group: gi, id: gi*s.perGroup + k, q: qs[k], out: os[k]})
		}
	}
	perm := rng.New(p.seed, "inference-perf/shuffle")
	perm.Shuffle(len(g.prompts), func(i, j int) { g.prompts[i], g.prompts[j] = g.prompts[j], g.prompts[i] })
	if s.multiTurn {
		g.sessions = make([]session, len(g.prompts))
		for i, pi := range g.prompts {
			g.sessions[i].ctx = []seg{{segSys(pi.group), g.tokens(g.sysLen[pi.group])}}
		}
	}
	return nil
}

// stageTimes are a stage's send times (s from the stage start), its rate
// and, for a concurrent stage, its concurrency level.
func (g *gen) stageTimes(r *rand.Rand, st Stage) ([]float64, float64, int) {
	switch g.p.loadType {
	case "concurrent":
		// inference-perf schedules a concurrent stage's requests over one
		// second (rate = num_requests, duration 1) and lets the workers'
		// concurrency hold them back.
		n := *st.NumRequests
		return constantTimes(r, float64(n), 1), float64(n), *st.ConcurrencyLevel
	case "poisson":
		return poissonTimes(r, *st.Rate, int(*st.Rate**st.Duration)), *st.Rate, 0
	}
	return constantTimes(r, *st.Rate, *st.Duration), *st.Rate, 0
}

// constantTimes is inference-perf's ConstantLoadTimer: int(rate·duration)
// exponential gaps of mean 1/rate, scaled to sum to the duration exactly
// (so the last request is sent at its end).
func constantTimes(r *rand.Rand, rate, duration float64) []float64 {
	n := int(rate * duration)
	if n <= 0 {
		return nil
	}
	gaps := make([]float64, n)
	sum := 0.0
	for i := range gaps {
		gaps[i] = r.ExpFloat64() / rate
		sum += gaps[i]
	}
	t, k := 0.0, duration/sum
	for i, v := range gaps {
		t += v * k
		gaps[i] = t
	}
	return gaps
}

// poissonTimes is inference-perf's PoissonLoadTimer: each second a
// Poisson(rate) count of requests spread over it as constantTimes does
// (a second without one is skipped), until n requests.
func poissonTimes(r *rand.Rand, rate float64, n int) []float64 {
	out := make([]float64, 0, n)
	base := 0.0
	for len(out) < n {
		k := poisson(r, rate)
		if k > 0 {
			for _, t := range constantTimes(r, float64(k), 1) {
				if len(out) == n {
					break
				}
				out = append(out, base+t)
			}
		}
		base++
	}
	return out
}

// poisson draws a Poisson count: Knuth's product of uniforms for small
// means, a rounded normal with continuity correction above 30.
func poisson(r *rand.Rand, lambda float64) int {
	if lambda > 30 {
		return max(0, int(math.Floor(lambda+math.Sqrt(lambda)*r.NormFloat64()+0.5)))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// request builds request k of stage si, sent at µs.
func (g *gen) request(c *Config, si, k int, at int64) (trace.Request, error) {
	p := g.p
	r := trace.NewRequest(fmt.Sprintf("s%d-%06d", si, k))
	r.ArrivalUS = at
	r.Stage = fmt.Sprint(si)
	r.RequestType = p.reqType
	r.Streaming = p.streaming
	r.TimeoutUS = p.timeoutUS
	switch p.kind {
	case "random", "synthetic":
		// Each stage starts the data generator's index at 0.
		if k >= len(p.inLens) || k >= len(p.outLens) {
			return r, c.errAt("data.input_distribution.total_count", "%d lengths, but stage %d sends %d requests: inference-perf fails every request past the %dth (raise total_count)", min(len(p.inLens), len(p.outLens)), si, k+1, min(len(p.inLens), len(p.outLens)))
		}
		r.InputTokens = int32(max(g.tokens(p.inLens[k]), 1))
		r.OutputTokens = int32(p.outLens[k])
		return r, nil
	}
	i := k % len(g.prompts) // each stage starts at prompt 0 again
	pi := g.prompts[i]
	r.OutputTokens = int32(pi.out)
	var segs []seg
	if g.sessions != nil {
		s := &g.sessions[i]
		// inference-perf prepends the session's context (at first the
		// group's system prompt, then every earlier prompt and answer) to
		// the prompt, and sends a round only when the previous one ended.
		r.SessionID = fmt.Sprintf("user_session_%d", pi.id)
		r.StepID = "turn"
		r.LoopIteration = int32(s.n)
		if s.last != "" {
			r.DependsOn = []string{s.last}
		}
		segs = append(append(segs, s.ctx...), g.promptSegs(pi)...)
		s.ctx = append(append([]seg(nil), segs...), seg{segAnswer(pi.id, s.n), pi.out})
		s.last, s.n = r.ID, s.n+1
	} else {
		segs = g.promptSegs(pi)
	}
	n := 0
	for _, sg := range segs {
		n += sg.n
	}
	if n > math.MaxInt32 {
		return r, c.errAt("data.shared_prefix", "a prompt of %d tokens", n)
	}
	r.InputTokens = int32(max(n, 1))
	r.PrefixHashes = g.hs.hash(segs)
	return r, nil
}

func (g *gen) promptSegs(pi promptInfo) []seg {
	return []seg{{segSys(pi.group), g.tokens(g.sysLen[pi.group])}, {segQuestion(pi.id), g.tokens(pi.q)}}
}

// Meta returns the requests-table metadata: prefix block size, the
// client's cap, and (for tables without multi-turn sessions, whose rounds
// depend on earlier rows) the sorted-arrival promise.
func (t *Table) Meta(md trace.Meta) trace.Meta {
	md.Set(trace.MetaPrefixBlockSize, fmt.Sprint(BlockSize))
	md.Set(trace.MetaSourceFormat, "blis-synth")
	if t.MaxInFlight > 0 {
		md.Set(trace.MetaMaxInFlight, fmt.Sprint(t.MaxInFlight))
	}
	sorted := true
	for i := range t.Requests {
		if len(t.Requests[i].DependsOn) > 0 {
			sorted = false
			break
		}
	}
	if sorted {
		md.Set(trace.MetaSorted, "arrival")
	}
	return md
}

// Summary is a one-line account of the table for stderr.
func (t *Table) Summary() string {
	s := fmt.Sprintf("%d rows in %d stage(s):", len(t.Requests), len(t.Stages))
	for _, st := range t.Stages {
		if st.ConcurrencyLevel > 0 {
			s += fmt.Sprintf(" %s: %d requests at concurrency %d;", st.Name, st.Requests, st.ConcurrencyLevel)
		} else {
			s += fmt.Sprintf(" %s: %d at %g req/s from %.1f s;", st.Name, st.Requests, st.Rate, float64(st.StartUS)/1e6)
		}
	}
	if t.MaxInFlight > 0 {
		s += fmt.Sprintf(" at most %d in flight", t.MaxInFlight)
	} else {
		s += " no cap on requests in flight"
	}
	return s
}
