package latency

import (
	"fmt"
	"math"
)

// ExpectedTokens is the mean number of tokens a request gains in one
// speculative step with k drafts, each accepted with probability alpha
// given its predecessors were (Leviathan et al. 2023, eq. 1): the accepted
// prefix plus the token the target samples after it,
// (1 − α^(k+1)) / (1 − α); k + 1 when every draft is accepted.
func ExpectedTokens(alpha float64, k int) float64 {
	if alpha >= 1 {
		return float64(k + 1)
	}
	return (1 - math.Pow(alpha, float64(k+1))) / (1 - alpha)
}

// Verify is the target model's view of a speculative step: each decoding
// request runs its last token and b.Draft drafts, so the step computes
// Draft more query tokens per decoding request. They are charged as prompt
// tokens (every GEMM of the step runs over them) attending over the
// request's context (causal pairs Draft·ctx + Draft·(Draft+1)/2 per
// request); the decode requests stay decodes, so per-request overheads and
// the LM head's one row per request are charged as without drafts.
func Verify(b *Batch) Batch {
	v := *b
	if b.Draft <= 0 || b.DecodeSeqs == 0 {
		v.Draft = 0
		return v
	}
	d, k := int64(b.DecodeSeqs), int64(b.Draft)
	v.PrefillTokens += d * k
	v.PrefillAttn += k*b.DecodeCtx + d*k*(k+1)/2
	v.Draft = 0
	return v
}

// Speculative is a step model with speculative decoding: a step whose
// batch carries drafts (Batch.Draft > 0) costs the target's verification
// of them (Verify) plus the proposer's passes: Draft runs once over the
// step's tokens (prompt chunks and the verified tokens, which it must see
// to propose from) and k − 1 more times over one token per decoding
// request. Draft is nil for a proposer without GPU work (n-gram prompt
// lookup runs on the CPU between steps). A step without drafts is the
// target's own.
type Speculative struct {
	Target Model
	Draft  Model
	Label  string
}

// StepTime implements Model.
func (s *Speculative) StepTime(b *Batch) int64 {
	if b.Draft <= 0 {
		return s.Target.StepTime(b)
	}
	v := Verify(b)
	t := s.Target.StepTime(&v)
	if s.Draft != nil {
		t += s.Draft.StepTime(&v)
		if k := int64(b.Draft); k > 1 {
			one := Batch{DecodeSeqs: b.DecodeSeqs, DecodeCtx: b.DecodeCtx + int64(b.DecodeSeqs)}
			t += (k - 1) * s.Draft.StepTime(&one)
		}
	}
	if t > MaxStepUS || t < 0 {
		return MaxStepUS
	}
	return t
}

// Alpha implements Model: the target's.
func (s *Speculative) Alpha() Alpha { return s.Target.Alpha() }

// Name implements Model.
// Window implements Windowed: the target model's window.
func (s *Speculative) Window() int32 { return WindowOf(s.Target) }

func (s *Speculative) Name() string {
	if s.Label != "" {
		return fmt.Sprintf("%s+%s", s.Target.Name(), s.Label)
	}
	return s.Target.Name()
}

// HostStepUS implements HostTimer with the target's CPU work per step.
func (s *Speculative) HostStepUS(b *Batch) int64 {
	if h, ok := s.Target.(HostTimer); ok {
		return h.HostStepUS(b)
	}
	return 0
}

// HostTimed implements HostTimer.
func (s *Speculative) HostTimed() bool {
	h, ok := s.Target.(HostTimer)
	return ok && h.HostTimed()
}
