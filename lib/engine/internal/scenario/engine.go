package scenario

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// Engine is one replica's engine as a `config` line gives it:
//
//	block=16 blocks=100 budget=8192 seqs=256 threshold=0 async prefix=on
//	alpha2=0 beta=(1000, 10, 100)
//
// (the defaults; slide=W [slide_groups=1] adds vLLM's hybrid KV cache
// manager's sliding-window groups of window W), the step time being the linear model
// β0 + β1·prefill tokens + β2·decode tokens µs. The scheduler checks its
// invariants as it forms steps.
type Engine struct {
	Sched     sched.Config
	Blocks    int32
	BlockSize int32
	Prefix    bool
	Model     *latency.Linear
	// Spec (draft=K accept=α [disable=N] [drafter=(β0, β1, β2)]) is
	// speculative decoding: the step time is then latency.Speculative over
	// Model, with a linear draft model when drafter is given.
	Spec *latency.Speculative
	// LoRA (loras=N adapters=(a, b, …) [lora_load=µs] [lora_tok=µs]
	// [lora_read=µs] [cpu_loras=N lora_fetch=µs]) is N adapter slots: an
	// adapted token's shrink/expand costs lora_tok µs, each distinct
	// adapter's weights lora_read µs (the step pays the larger sum), a load
	// into a slot lora_load µs, one from storage lora_fetch more.
	LoRA *latency.LoRA
}

// StepTime is the step's duration under the engine's model.
func (e *Engine) StepTime(b *latency.Batch) int64 {
	if e.LoRA != nil {
		return e.LoRA.StepTime(b)
	}
	if e.Spec != nil {
		return e.Spec.StepTime(b)
	}
	return e.Model.StepTime(b)
}

// ReadEngine reads an engine's keys from a's directive.
func ReadEngine(a *Args) Engine {
	a.tb.Helper()
	e := Engine{
		Blocks:    int32(a.Int("blocks", 100)),
		BlockSize: int32(a.Int("block", 16)),
		Prefix:    a.Bool("prefix", true),
		Sched: sched.Config{
			MaxNumBatchedTokens:  int32(a.Int("budget", 8192)),
			MaxNumSeqs:           int(a.Int("seqs", 256)),
			LongPrefillThreshold: int32(a.Int("threshold", 0)),
			Alpha2:               a.Float("alpha2", 0),
			Async:                a.Bool("async", false),
			Checks:               true,
		},
		Model: &latency.Linear{Beta0: 1000, Beta1: 10, Beta2: 100},
	}
	if b := a.Floats("beta"); b != nil {
		if len(b) != 3 {
			a.Fatalf("beta: expected (β0, β1, β2), found %d values", len(b))
		}
		e.Model.Beta0, e.Model.Beta1, e.Model.Beta2 = b[0], b[1], b[2]
	}
	e.Model.A.PerOutputToken = e.Sched.Alpha2
	if k := a.Int("draft", 0); k > 0 {
		alpha := a.Float("accept", 0)
		e.Sched.Spec = &sched.Spec{K: int32(k), DisableBatch: int(a.Int("disable", 0)),
			Tokens: []int64{int64(latency.ExpectedTokens(alpha, int(k))*sched.SpecQ + 0.5)}}
		e.Spec = &latency.Speculative{Target: e.Model}
		if d := a.Floats("drafter"); d != nil {
			if len(d) != 3 {
				a.Fatalf("drafter: expected (β0, β1, β2), found %d values", len(d))
			}
			e.Spec.Draft = &latency.Linear{Beta0: d[0], Beta1: d[1], Beta2: d[2]}
		}
	}
	if n := a.Int("loras", 0); n > 0 {
		names := a.Strs("adapters")
		l := &sched.LoRA{MaxLoras: int(n), MaxCPU: int(a.Int("cpu_loras", 0)), Index: map[string]uint16{}, Names: names}
		load, tok, read, fetch := a.Int("lora_load", 0), a.Int("lora_tok", 0), a.Int("lora_read", 0), a.Int("lora_fetch", 0)
		for i, nm := range names {
			l.Index[nm] = uint16(i + 1)
			l.Bytes, l.FLOPs = append(l.Bytes, read), append(l.FLOPs, tok)
			l.LoadUS, l.FetchUS = append(l.LoadUS, load), append(l.FetchUS, fetch)
		}
		e.Sched.LoRA = l
		var base latency.Model = e.Model
		if e.Spec != nil {
			base = e.Spec
		}
		e.LoRA = &latency.LoRA{Base: base, FLOPsPerUS: 1, BytesPerUS: 1}
	}
	if w := a.Int("slide", 0); w > 0 {
		e.Sched.Hybrid = &sched.Hybrid{Window: int32(w), Groups: int32(a.Int("slide_groups", 1))}
	}
	if e.Blocks < 1 || e.BlockSize < 1 || e.Sched.MaxNumBatchedTokens < 1 || e.Sched.MaxNumSeqs < 1 {
		a.Fatalf("blocks, block, budget and seqs must be >= 1")
	}
	return e
}

// New returns an empty scheduler over a fresh KV store, and the key
// deriver its requests' prefix hashes go through (one hash per block).
func (e *Engine) New() (*sched.VLLM, *request.Keyer) {
	keys := &request.Keyer{Enabled: e.Prefix, PrefixBlock: e.BlockSize, Block: e.BlockSize}
	return sched.NewVLLM(e.Sched, kv.NewPaged(e.Blocks, e.BlockSize), keys, nil, nil), keys
}

// String describes the engine in one line.
func (e *Engine) String() string {
	s := fmt.Sprintf("%d blocks of %d tokens, budget %d tokens, max_num_seqs %d", e.Blocks, e.BlockSize, e.Sched.MaxNumBatchedTokens, e.Sched.MaxNumSeqs)
	if e.Sched.LongPrefillThreshold > 0 {
		s += fmt.Sprintf(", long prefill threshold %d", e.Sched.LongPrefillThreshold)
	}
	if e.Sched.Async {
		s += ", async scheduling"
	}
	if !e.Prefix {
		s += ", no prefix caching"
	}
	if h := e.Sched.Hybrid; h != nil {
		s += fmt.Sprintf(", hybrid KV: %s of window %d", Plural(int64(h.Groups), "sliding group"), h.Window)
	}
	s += fmt.Sprintf("; step = %g + %g·prefill + %g·decode µs", e.Model.Beta0, e.Model.Beta1, e.Model.Beta2)
	if e.Sched.Alpha2 > 0 {
		s += fmt.Sprintf("; α2 %g µs per token", e.Sched.Alpha2)
	}
	if sp := e.Sched.Spec; sp != nil {
		s += fmt.Sprintf("; speculative: %d drafts, %.4g tokens per step", sp.K, float64(sp.Tokens[0])/sched.SpecQ)
		if sp.DisableBatch > 0 {
			s += fmt.Sprintf(", off at %d running", sp.DisableBatch)
		}
		if d, ok := e.Spec.Draft.(*latency.Linear); ok {
			s += fmt.Sprintf(", draft pass = %g + %g·tokens + %g·decode µs", d.Beta0, d.Beta1, d.Beta2)
		}
	}
	if l := e.Sched.LoRA; l != nil {
		s += fmt.Sprintf("; LoRA: %s for %s; + max(%d·adapted tokens, %d·adapters) µs, loads %d µs", Plural(int64(l.MaxLoras), "slot"), strings.Join(l.Names, ", "), l.FLOPs[0], l.Bytes[0], l.LoadUS[0])
		if l.MaxCPU > 0 {
			s += fmt.Sprintf(", %d in host memory, fetches %d µs", l.MaxCPU, l.FetchUS[0])
		}
	}
	return s
}

// Batch describes a step just formed: each scheduled request's chunk
// (tokens it had computed + the chunk), the decoding requests, in rs's
// order, and the batch's totals.
func Batch(rs []*request.State, b *latency.Batch) string {
	var pre, dec []string
	for _, r := range rs {
		if r.Chunk > 0 {
			pre = append(pre, fmt.Sprintf("%s %d+%d", r.Req.ID, r.Computed, r.Chunk))
		} else if r.Decoding && r.Phase == request.Running {
			dec = append(dec, r.Req.ID)
		}
	}
	var parts []string
	if len(pre) > 0 {
		parts = append(parts, "prefill "+strings.Join(pre, ", "))
	}
	if len(dec) > 0 {
		parts = append(parts, "decode "+strings.Join(dec, ", "))
	}
	if b.Draft > 0 {
		parts = append(parts, Plural(int64(b.Draft), "draft")+" each")
	}
	parts = append(parts, Plural(b.PrefillTokens+int64(b.DecodeSeqs)*int64(1+b.Draft), "token"))
	if b.LoRAFLOPs > 0 || b.LoRALoadUS > 0 {
		parts = append(parts, fmt.Sprintf("lora %d·tok %d·read, load %d µs", b.LoRAFLOPs, b.LoRABytes, b.LoRALoadUS))
	}
	return strings.Join(parts, "; ")
}

// Plural is "1 token", "2 tokens".
func Plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

var phases = map[request.Phase]string{request.Pending: "pending", request.Arriving: "arriving",
	request.Routed: "routed", request.Waiting: "waiting", request.Running: "running", request.Tool: "tool",
	request.Done: "done", request.Transfer: "transfer"}

// Phase names a request phase.
func Phase(p request.Phase) string { return phases[p] }

// Describe is one line of r's progress on a replica; gen is its generated
// tokens (the scheduler's Progress: decode progress is implicit, so a
// decoding request's computed tokens are not kept up to date).
func Describe(r *request.State, gen int32) string {
	if r.Status != "" {
		return Outcome(r)
	}
	var s string
	if r.Decoding {
		s = fmt.Sprintf("%s decoding: generated %d/%d, %d blocks", r.Req.ID, gen, r.Req.OutputTokens, r.KV.Blocks())
	} else {
		s = fmt.Sprintf("%s %s: computed %d/%d, generated %d/%d, %d blocks", r.Req.ID, Phase(r.Phase),
			r.Computed, r.NumTokens(), gen, r.Req.OutputTokens, r.KV.Blocks())
	}
	if r.KV.Slide > 0 {
		s += fmt.Sprintf(" + %d sliding", r.KV.Slide)
	}
	if r.CachedTok > 0 {
		s += fmt.Sprintf(", %d cached", r.CachedTok)
	}
	if r.Preemptions > 0 {
		s += ", " + Plural(int64(r.Preemptions), "preemption")
	}
	return s
}

// Outcome is one line of a request that left its replica: status, tokens,
// when it was first scheduled, saw its first token and finished.
func Outcome(r *request.State) string {
	if r.Status == "" && r.Phase == request.Transfer {
		return fmt.Sprintf("%s prefilled: %d tokens computed, handed off to a decode replica", r.Req.ID, r.Computed)
	}
	s := fmt.Sprintf("%s %s: %d/%d tokens, scheduled %s, first token %s, finished %s", r.Req.ID, r.Status,
		r.Generated, r.Req.OutputTokens, T(r.FirstSched), T(r.FirstTok), T(r.Finished))
	if r.CachedTok > 0 {
		s += fmt.Sprintf(", %d cached", r.CachedTok)
	}
	if r.Preemptions > 0 {
		s += ", " + Plural(int64(r.Preemptions), "preemption")
	}
	return s
}

// Queue is what a one-replica harness (sched, replica) keeps: the clock
// and the requests by name, in the order they were enqueued.
type Queue struct {
	Now  int64
	Reqs []*request.State
	by   map[string]*request.State
}

// Reset empties the queue and sets the clock to 0.
func (q *Queue) Reset() { *q = Queue{by: map[string]*request.State{}} }

// Advance moves the clock to at, never back.
func (q *Queue) Advance(a *Args, at int64) {
	a.tb.Helper()
	if at < q.Now {
		a.Fatalf("at=%d is before now (%d)", at, q.Now)
	}
	q.Now = at
}

// Read reads an enqueue directive: at=µs (default now) is when its
// requests reach the queue; while a step executes (busy) the clock stays
// at the step's start. It returns the new requests, their Enqueued set.
func (q *Queue) Read(tb testing.TB, td *datadriven.TestData, a *Args, busy bool) (int64, []*request.State) {
	tb.Helper()
	at := a.Int("at", q.Now)
	a.Done()
	if at < q.Now {
		a.Fatalf("at=%d is before now (%d)", at, q.Now)
	}
	if !busy {
		q.Now = at
	}
	var out []*request.State
	for _, l := range Lines(tb, td) {
		if q.by[l.Name] != nil {
			l.Fatalf("request %s enqueued twice", l.Name)
		}
		r := State(Request(l.Name, l.Args))
		l.Done()
		r.Enqueued = at
		q.Reqs = append(q.Reqs, r)
		q.by[l.Name] = r
		out = append(out, r)
	}
	return at, out
}

// Get is the request named id.
func (q *Queue) Get(a *Args, id string) *request.State {
	a.tb.Helper()
	r := q.by[id]
	if r == nil {
		a.Fatalf("no request %s", id)
	}
	return r
}

// IDs lists rs's ids.
func IDs(rs []*request.State) string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.Req.ID
	}
	return strings.Join(ids, ", ")
}

// Print logs every request: its outcome once done, else its progress
// (gen: the scheduler's Progress).
func (q *Queue) Print(log *Log, gen func(*request.State) int32) {
	for _, r := range q.Reqs {
		if r.Phase == request.Done {
			log.Printf("%s", Outcome(r))
			continue
		}
		log.Printf("%s", Describe(r, gen(r)))
	}
}
