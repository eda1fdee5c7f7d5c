package replica

import (
	"math"
	"unsafe"

	"github.com/blis-sim/blis/lib/latency"
)

// Leaping (docs/engine.md, "Leaping"): when the scheduler promises a span
// of steps that decode the same requests (sched.Span) and the model can
// price them (latency.Leaper), the replica runs the whole span as one
// step for the cluster: one event at the end of its last step. The steps
// in between are applied when someone looks (CatchUp) or when the span
// ends or is cut short, exactly as they would have been one at a time.

// Hold is a reason a replica takes every step one at a time although its
// model could leap them (Replica.HoldLeap). A feature whose steps are not
// the plain decode steps a ramp prices — speculative decoding, LoRA
// adapter swaps, anything that changes a step's time or tokens between
// the events that change the batch — adds its own bit and holds the
// replicas it is on (docs/engine.md, "Leaping: what a replica must
// promise").
type Hold uint16

const (
	// HoldSteps: each step's row is written (a steps table, decisions at
	// level full).
	HoldSteps Hold = 1 << iota
	// HoldPrefill: a P/D prefill replica (its steps are prefills).
	HoldPrefill
	// HoldTierRates: a policy may read the offload and reload rates of
	// the replica's lower KV tiers, whose windows roll when the router's
	// board is refreshed — after every step, stepping.
	HoldTierRates
	// HoldSpeculative: speculative decoding (a step decodes 1 to k+1
	// tokens per request, and drafts): a span's steps are not decodes of
	// one token.
	HoldSpeculative
	// HoldLoRA: the deployment serves LoRA adapters (adapter loads and
	// slots change a step's time and who may run between batch changes).
	HoldLoRA
)

// HoldLeap adds reason h for stepping the replica one step at a time
// from its next step on. A span in progress is not ended by it: the
// cluster cuts one first (as every batch change does).
func (p *Replica) HoldLeap(h Hold) { p.holds |= h }

// ReleaseLeap withdraws reason h.
func (p *Replica) ReleaseLeap(h Hold) { p.holds &^= h }

// Leapable reports whether the replica's next decode-only steps may be
// run as a span: its model can price them (Ramps, the deployment's model
// and no wrapper of it) and nothing holds it.
func (p *Replica) Leapable() bool {
	return p.holds == 0 && p.Ramps != nil && p.Model == p.Ramps.Model
}

// Ramps caches a deployment's step-time ramps by batch size (shared by its
// replicas; a ramp is built once per size).
type Ramps struct {
	// Model is the deployment's step model; a replica whose model is
	// another (slowed while warming up) is stepped.
	Model latency.Model
	by    []*memoRamp
	tried []bool
}

// NewRamps returns an empty cache for model m.
func NewRamps(m latency.Model) *Ramps { return &Ramps{Model: m} }

func (r *Ramps) get(seqs int) *memoRamp {
	if seqs >= len(r.by) {
		n := max(seqs+1, 2*len(r.by))
		r.by = append(r.by, make([]*memoRamp, n-len(r.by))...)
		r.tried = append(r.tried, make([]bool, n-len(r.tried))...)
	}
	if !r.tried[seqs] {
		f := latency.RampOf(r.Model, seqs)
		if f != nil && !agrees(f, r.Model, seqs) {
			f = nil // a ramp promoted from an embedded model whose StepTime was overridden, say
		}
		if f != nil {
			r.by[seqs] = newMemoRamp(f, seqs <= memoSeqs)
		}
		r.tried[seqs] = true
	}
	return r.by[seqs]
}

// memoRamp is a ramp that remembers its values (at least 1 µs, as a span
// prices a step). Spans of one batch size evaluate the same contexts over
// and over — at batch 1 every span's runs end at the same contexts, so the
// day of bench/fleet-day.yaml's first 4 hours makes 39 M calls at 2,486
// contexts — and a remembered value is a load where the ramp is its
// model's arithmetic. Slots are direct-mapped by a hash of the context: a
// context whose slot another holds is priced again.
type memoRamp struct {
	f     latency.Ramp
	slots []uint64 // ctx<<memoDurBits | dur; 0: empty (dur ≥ 1)
	// up[v−upBase] is the least context at which the ramp exceeds v µs
	// (0: not found yet). A run of equal step times ends there whatever
	// span it is in, so at small batches — a lightly loaded fleet's
	// replicas decode one request at a time, ~25 runs a request — each
	// run's end is searched once for all the deployment's replicas
	// (runEnd). upBase is the ramp at context 0, its least value.
	up     []int64
	upBase int64
}

// upMax bounds up's length: step times more than this many µs above the
// ramp's least are searched every time.
const upMax = 1 << 16

const (
	memoSeqs    = 4
	memoBits    = 12 // 4,096 slots, 32 KiB a batch size
	memoDurBits = 24 // durations up to 16.7 s are remembered
)

func newMemoRamp(f latency.Ramp, remember bool) *memoRamp {
	m := &memoRamp{f: f}
	if remember {
		m.slots = make([]uint64, 1<<memoBits)
		m.upBase = m.at(0)
	}
	return m
}

// runEnd returns the least context above c, where the ramp is v, at which
// it exceeds v, looking no further than limit (0: it is v up to limit).
// Ramps are non-decreasing (latency.Leaper): a run's end found once is
// remembered (up); else it is searched by galloping from c, then
// bisecting. calls counts the ramp's evaluations.
func (m *memoRamp) runEnd(c, v, limit int64, calls *int) int64 {
	j := v - m.upBase
	if j >= 0 && j < int64(len(m.up)) {
		if b := m.up[j]; b > c {
			return b
		}
	}
	lo, hi := c, int64(0) // m.at(lo) == v < m.at(hi)
	for d := int64(1); hi == 0; d *= 2 {
		x := min(c+d, limit) // d stops growing once x reaches limit
		if x <= lo {
			return 0 // v up to limit
		}
		*calls++
		if m.at(x) > v {
			hi = x
		} else {
			lo = x
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		*calls++
		if m.at(mid) > v {
			hi = mid
		} else {
			lo = mid
		}
	}
	if j >= 0 && j < upMax {
		if j >= int64(len(m.up)) {
			m.up = append(m.up, make([]int64, j+1-int64(len(m.up)))...)
		}
		m.up[j] = hi
	}
	return hi
}

// at is max(f(ctx), 1).
func (m *memoRamp) at(ctx int64) int64 {
	if m.slots == nil || uint64(ctx) >= 1<<(64-memoDurBits) {
		return max(m.f(ctx), 1)
	}
	i := (uint64(ctx) * 0x9E3779B97F4A7C15) >> (64 - memoBits)
	if e := m.slots[i]; e != 0 && e>>memoDurBits == uint64(ctx) {
		return int64(e & (1<<memoDurBits - 1))
	}
	v := max(m.f(ctx), 1)
	if v < 1<<memoDurBits {
		m.slots[i] = uint64(ctx)<<memoDurBits | uint64(v)
	}
	return v
}

// agrees checks a ramp against the model's StepTime at a few contexts,
// once per batch size: a model that embeds a Leaper but changes its step
// time is stepped, not leapt with a ramp that is not its own.
func agrees(f latency.Ramp, m latency.Model, seqs int) bool {
	for _, per := range [...]int64{0, 1, 700, 40000} {
		ctx := per * int64(seqs)
		if f(ctx) != m.StepTime(&latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx}) {
			return false
		}
	}
	return true
}

// leapRun is n consecutive steps of a span lasting dur µs each.
type leapRun struct{ dur, n int64 }

// span is the replica's span in progress.
type span struct {
	on    bool
	first int64 // scheduler step index of its first step
	n     int64 // its steps: the last one's end is the cluster's event
	// Step times are priced as the span goes (a span is often cut short
	// by an arrival): priced steps from the first, in runs, the last
	// ending at end; until all n are, the cluster's event at end only
	// prices more (Extend).
	priced, end int64
	budget      int // ramp calls for the next pricing
	ramp        *memoRamp
	ctx0, seqs  int64
	runs        []leapRun
	// Applied so far: done steps completed, the last ending at doneEnd
	// (the span's start while done is 0); formed steps formed (done or
	// done+1); step first+done is runs[ri]'s (rk+1)-th.
	done, doneEnd, formed int64
	ri                    int
	rk                    int64
}

// maxLeapEnd bounds a span's end: the clock must not overflow.
const maxLeapEnd = 1 << 62

// firstBudget is the ramp calls a span's first pricing may make: the
// steps up to the next arrival, typically; each later pricing doubles it.
const firstBudget = 12

// Leaping reports whether a span is in progress.
func (p *Replica) Leaping() bool { return p.span.on }

// leap turns the decode-only step Start just formed at now into a span
// when the scheduler promises more steps like it and the model prices
// them (its first step too: the ramp is its step time). It returns the
// end of the span's last priced step and that step's duration, the
// cluster's next event for the replica; not ok leaves the step to Start.
func (p *Replica) leap(now int64) (end, last int64, ok bool) {
	sp, ok := p.Sched.Span()
	if !ok {
		return 0, 0, false
	}
	ramp := p.Ramps.get(sp.Seqs)
	if ramp == nil {
		return 0, 0, false
	}
	s := &p.span
	dur := ramp.at(sp.Ctx0)
	s.runs = append(s.runs[:0], leapRun{dur, 1})
	s.first, s.n, s.priced, s.end = p.Sched.StepIndex(), sp.Steps, 1, now+dur
	s.ramp, s.ctx0, s.seqs, s.budget = ramp, sp.Ctx0, int64(sp.Seqs), firstBudget
	s.price()
	if s.n < 2 {
		return 0, 0, false
	}
	s.on = true
	s.done, s.doneEnd, s.formed, s.ri, s.rk = 0, now, 1, 0, 0
	return s.end, s.runs[len(s.runs)-1].dur, true
}

// Executing reports whether a span's step is executing (not one just
// ended with the next not formed yet).
func (p *Replica) Executing() bool { return p.span.formed > p.span.done }

// Continues reports whether the span has steps not priced yet: the
// cluster's event at the last priced step's end is then Extend's.
func (p *Replica) Continues() bool { return p.span.priced < p.span.n }

// Extend prices more of the span; it returns the end of its last priced
// step and that step's duration.
func (p *Replica) Extend() (end, last int64) {
	s := &p.span
	s.budget = min(2*s.budget, 1<<20)
	s.price()
	return s.end, s.runs[len(s.runs)-1].dur
}

// price prices steps from s.priced on, with about s.budget ramp calls.
// Step times are non-decreasing (latency.Leaper), so equal ones come in
// runs. A ramp close to linear in the context (the roofline's, memory
// bound) gives runs of nearly equal length: a run is first guessed as
// long as the one before and the steps around the guess's end checked
// (two or three calls, the last the next run's first step); a guess off
// by more, or no run to go by, is searched by galloping, then bisecting.
// A remembered ramp (a small batch) knows where its runs end (runEnd).
func (s *span) price() {
	n, calls := s.n, 0
	at := func(i int64) int64 {
		calls++
		return s.ramp.at(s.ctx0 + i*s.seqs)
	}
	i, end := s.priced, s.end
	next := int64(-1) // at(i) when already known
	for i < n && calls < s.budget {
		v := next
		if v < 0 {
			v = at(i)
		}
		next = -1
		if end > maxLeapEnd-v {
			n = i
			break
		}
		r := &s.runs[len(s.runs)-1]
		if v != r.dur {
			s.runs = append(s.runs, leapRun{v, 0})
			r = &s.runs[len(s.runs)-1]
		}
		if s.ramp.slots != nil {
			// A small batch: the run ends at the first step whose
			// context reaches the ramp's next value (runEnd).
			c := s.ctx0 + i*s.seqs
			k := n - i
			if b := s.ramp.runEnd(c, v, s.ctx0+(n-1)*s.seqs, &calls); b > 0 {
				k = min(k, (b-c+s.seqs-1)/s.seqs) // (a remembered end may lie past the span)
			}
			if k > 1 && v > 0 && (maxLeapEnd-end)/v < k {
				k = (maxLeapEnd - end) / v
				n = i + k
			}
			r.n += k
			end += k * v
			i += k
			continue
		}
		lo, hi := i, n // at(lo) == v; at(hi) > v, or hi == n
		seen, seenV := int64(-1), int64(0)
		differs := func(x int64) bool {
			if w := at(x); w != v {
				seen, seenV = x, w
				return true
			}
			return false
		}
		found := false
		if len(s.runs) >= 2 {
			// Runs of a linear ramp are L or L+1 steps long: look at the
			// guess's last step and a step or two either side.
			if rem := s.runs[len(s.runs)-2].n - r.n; rem >= 3 && i+rem-1 < n {
				x := i + rem - 1
				if !differs(x) {
					lo = x
					for y := x + 1; y <= x+2; y++ {
						if y >= n {
							found = true
							break
						}
						if differs(y) {
							hi, found = y, true
							break
						}
						lo = y
					}
				} else if hi = x; !differs(x - 1) {
					lo, found = x-1, true
				} else {
					hi = x - 1
				}
			}
		}
		for step := int64(1); !found && lo+step < n; step *= 2 {
			if differs(lo + step) {
				hi = lo + step
				break
			}
			lo += step
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if differs(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		if hi == seen {
			next = seenV
		}
		k := lo - i + 1
		// (one step fits: checked above; runs are mostly one step long
		// at larger batches, so the division is skipped then)
		if k > 1 && v > 0 && (maxLeapEnd-end)/v < k {
			k = (maxLeapEnd - end) / v
			n = i + k
			next = -1
		}
		r.n += k
		end += k * v
		i += k
	}
	s.n, s.priced, s.end = n, i, end
}

// CatchUp applies the span's steps up to t: those that ended before t
// have completed and those that started before t have been formed; at t
// itself, ended(dur) says whether the step of dur ending at t has ended,
// formedAt(prev) whether the step starting at t, after one of prev µs,
// has been formed (the cluster's order of events at t decides). It never
// goes back, and never completes the span's last step (its end is the
// cluster's event).
func (p *Replica) CatchUp(t int64, ended, formedAt func(dur int64) bool) {
	s := &p.span
	if !s.on {
		return
	}
	done0, end0 := s.done, s.doneEnd
	for s.done < s.priced-1 { // never the last priced step: its end is an event
		r := s.runs[s.ri]
		left := min(r.n-s.rk, s.priced-1-s.done)
		var k int64 // this run's steps that end before t
		if d := t - s.doneEnd - 1; d >= left*r.dur {
			k = left // the whole rest of the run (no division: the common case)
		} else if d >= 0 {
			k = d / r.dur
		}
		s.done += k
		s.doneEnd += k * r.dur
		s.rk += k
		if k == left && s.rk == r.n {
			s.ri, s.rk = s.ri+1, 0
			continue
		}
		if k < left && s.doneEnd+r.dur == t && ended(r.dur) {
			s.done++
			s.doneEnd = t
			if s.rk++; s.rk == r.n {
				s.ri, s.rk = s.ri+1, 0
			}
		}
		break
	}
	formed := s.done
	if s.done == 0 || s.doneEnd < t || s.doneEnd == t && formedAt(p.prevDur()) {
		formed = s.done + 1
	}
	if s.done == done0 && formed <= s.formed {
		return
	}
	s.formed = max(s.formed, formed)
	lastStart := s.doneEnd
	if s.formed == s.done {
		lastStart = s.doneEnd - p.prevDur()
	}
	p.Sched.AdvanceTo(s.first+s.done, s.formed > s.done, lastStart, s.doneEnd)
	p.Steps += s.done - done0
	p.BusyUS += s.doneEnd - end0
	p.stepStart = lastStart
}

// prevDur is the duration of the last completed step of the span.
func (p *Replica) prevDur() int64 {
	s := &p.span
	if s.rk > 0 {
		return s.runs[s.ri].dur
	}
	return s.runs[s.ri-1].dur
}

// EndLeap applies every step of the span but the last, which has ended:
// End completes it as any step.
func (p *Replica) EndLeap() {
	s := &p.span
	p.CatchUp(s.end, func(int64) bool { return true }, func(int64) bool { return true })
	s.on = false
}

// Cut ends the span at the state CatchUp left: either a step is executing
// (executing; it ends at end after dur µs) or the last step ended just
// now and the next is not formed (a start must be queued after the step of
// prev µs that ended).
func (p *Replica) Cut() (executing bool, end, dur, prev int64) {
	s := &p.span
	s.on = false
	if s.formed > s.done {
		dur = s.runs[s.ri].dur
		p.busy, p.stepStart = true, s.doneEnd
		return true, s.doneEnd + dur, dur, 0
	}
	p.busy, p.startPending = false, true
	return false, 0, 0, p.prevDur()
}

// Shorten ends the span extra steps after the one executing (CatchUp
// left one executing): an async scheduler sees a request enqueued now
// only two steps on. It returns the span's new end and last step's
// duration when its event moves (moved).
func (p *Replica) Shorten(extra int64) (end, last int64, moved bool) {
	s := &p.span
	keep := s.done + 1 + extra // steps from the span's first
	if keep >= s.n || s.formed == s.done {
		return 0, 0, false
	}
	s.n = keep
	if s.priced <= keep {
		return 0, 0, false // its event prices the rest, now fewer
	}
	// The priced runs up to step keep−1, from the executing step on.
	i, k, t := s.ri, s.rk, s.doneEnd
	for left := extra + 1; ; {
		m := min(left, s.runs[i].n-k)
		t += m * s.runs[i].dur
		left -= m
		k += m
		if left == 0 {
			break
		}
		i, k = i+1, 0
	}
	s.runs[i].n = k
	s.runs = s.runs[:i+1]
	s.priced, s.end = keep, t
	return t, s.runs[i].dur, true
}

// KVChangeAt is when the replica's KV use next changes unreported: the
// start of the next step of its span that takes a block (math.MaxInt64:
// not in a span; the span's end reports itself). From then on a reader
// must bring it up to date first.
func (p *Replica) KVChangeAt() int64 {
	s := &p.span
	if !s.on {
		return math.MaxInt64
	}
	j, ok := p.Sched.NextAlloc()
	if !ok || j-s.first >= s.n {
		return math.MaxInt64
	}
	// The start of step j: the executing (or next) step starts at doneEnd.
	k := j - (s.first + s.done) // steps between
	if s.first+s.priced <= j {
		return s.end // not priced yet: no later than the last priced step's end
	}
	t, i, rk := s.doneEnd, s.ri, s.rk
	for k > 0 {
		m := min(k, s.runs[i].n-rk)
		t += m * s.runs[i].dur
		k -= m
		i, rk = i+1, 0
	}
	return t
}

// NextLeapEvent is the time of the span's next step end or formation
// not applied yet (the span's end when nothing is left before it).
func (p *Replica) NextLeapEvent() int64 {
	s := &p.span
	if s.formed == s.done && s.done > 0 {
		return s.doneEnd
	}
	if s.done >= s.priced-1 {
		return s.end
	}
	return s.doneEnd + s.runs[s.ri].dur
}

// LastLeapEnd is the end of the last step of the span applied so far
// (math.MinInt64 before any).
func (p *Replica) LastLeapEnd() (int64, bool) {
	s := &p.span
	return s.doneEnd, s.done > 0
}

// SpanRun is the address of the run CatchUp reads first, for a read-ahead
// (nil: no span).
func (p *Replica) SpanRun() unsafe.Pointer {
	if s := &p.span; s.on && s.ri < len(s.runs) {
		return unsafe.Pointer(&s.runs[s.ri])
	}
	return nil
}
