package bundle

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
)

// What a policy may know of a request's output length. A real gateway or
// engine sees the prompt and what the client declares, never how long the
// answer will be; a policy that reads the true length learns a rule no
// router can run. So request.output_tokens is, by default, a prediction
// from the bundle's predictor, and the true length only with oracle: true
// (recorded in the results' metadata, and flagged by blis-report).

// Predictor kinds.
const (
	PredictNone  = "none"  // the output length is unknown (Starlark None; a tree may not read it)
	PredictClass = "class" // the mean output length of the request's SLO class so far
	PredictNoisy = "noisy" // the true length × e^(error·z), z standard normal per request
)

// PredictorKinds lists them.
var PredictorKinds = []string{PredictNone, PredictClass, PredictNoisy}

// Predictor is a bundle's output-length predictor.
type Predictor struct {
	Kind string
	// Error is the noisy predictor's σ: the prediction is the true length
	// × e^(σ·z), z ~ N(0, 1) drawn per request from the seed and its id (a
	// log-normal relative error: σ = 0.5 puts 68 % of predictions within a
	// factor of e^0.5 ≈ 1.65).
	Error float64
	// Prior is the class predictor's answer (tokens) before any request has
	// completed; 0: unknown until then.
	Prior float64
}

// String describes it for the results' metadata (blis.policy.predictor).
func (p Predictor) String() string {
	switch p.Kind {
	case PredictNoisy:
		return "noisy error=" + strconv.FormatFloat(p.Error, 'g', -1, 64)
	case PredictClass:
		if p.Prior > 0 {
			return "class prior=" + strconv.FormatFloat(p.Prior, 'g', -1, 64)
		}
		return "class"
	}
	return PredictNone
}

// observer answers what a run's policies see of output lengths.
type observer struct {
	oracle bool
	p      Predictor
	seed   uint64
	// class predictor: completed llm requests' output tokens, per SLO
	// class and in all (learned from the results, as a gateway's logs).
	classes map[string]*meanAcc
	all     meanAcc
}

type meanAcc struct {
	n   int64
	sum float64
}

func newObserver(b *Bundle, seed uint64) *observer {
	o := &observer{oracle: b.Oracle, p: b.Predictor, seed: seed}
	if o.p.Kind == PredictClass && !o.oracle {
		o.classes = map[string]*meanAcc{}
	}
	return o
}

// learns reports whether the observer needs the run's results.
func (o *observer) learns() bool { return o.classes != nil }

// finished learns a completed request's output length (class predictor).
func (o *observer) finished(r *row.Result) {
	if r.Status != row.StatusCompleted || r.Kind != row.KindLLM {
		return
	}
	a := o.classes[r.SLOClass]
	if a == nil {
		a = &meanAcc{}
		o.classes[r.SLOClass] = a
	}
	x := float64(r.OutputTokens)
	a.n, a.sum = a.n+1, a.sum+x
	o.all.n, o.all.sum = o.all.n+1, o.all.sum+x
}

// output is the output length a policy sees for rv, and whether it knows
// one.
func (o *observer) output(rv policy.RequestView) (int64, bool) {
	if o == nil {
		return 0, false
	}
	if o.oracle {
		return int64(rv.TrueOutputTokens()), true
	}
	switch o.p.Kind {
	case PredictNoisy:
		x := float64(rv.TrueOutputTokens()) * math.Exp(o.p.Error*o.normal(rv.ID()))
		return max(1, int64(math.Round(x))), true
	case PredictClass:
		if a := o.classes[rv.SLOClass()]; a != nil && a.n > 0 {
			return int64(math.Round(a.sum / float64(a.n))), true
		}
		if o.all.n > 0 {
			return int64(math.Round(o.all.sum / float64(o.all.n))), true
		}
		if o.p.Prior > 0 {
			return int64(math.Round(o.p.Prior)), true
		}
	}
	return 0, false
}

// normal is a standard normal draw for request id: a hash of the seed and
// the id (so it does not depend on the order requests are seen in, and a
// fork or a replay sees the same), through Box–Muller.
func (o *observer) normal(id string) float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	x := h.Sum64() ^ (o.seed * 0x9E3779B97F4A7C15)
	u1 := float64(splitmix(&x)>>11+1) / (1 << 53) // (0, 1]
	u2 := float64(splitmix(&x)>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

func splitmix(x *uint64) uint64 {
	*x += 0x9E3779B97F4A7C15
	z := *x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (o *observer) clone() *observer {
	d := *o
	if o.classes != nil {
		d.classes = deepCopy(o.classes)
	}
	return &d
}

// outputField reads request.output_tokens for trees (a tree may read it
// only when a predictor or the oracle gives a number: checked at load).
func outputField(c *evalCtx) int64 {
	v, _ := c.ob.output(c.rv)
	return v
}

func errNoOutput() error {
	return fmt.Errorf("request.output_tokens is unknown to a real router: give the bundle an output-length predictor (predictor: {kind: class} or {kind: noisy, error: σ}), or oracle: true for the true length")
}
