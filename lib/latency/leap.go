package latency

// Leaping (docs/engine.md, "Leaping"): between the events that change a
// replica's batch, its steps decode the same requests, and only their
// summed context (Batch.DecodeCtx) grows, by one token per request per
// step. The engine advances such a run of steps at once when the model
// can price it without StepTime being asked step by step.

// Ramp is the step time of a decode-only batch of a fixed size as a
// function of its summed context length (Batch.DecodeCtx).
type Ramp func(ctx int64) int64

// Leaper is implemented by a Model whose decode-only steps can be priced
// by a Ramp. A model that does not implement it, or returns nil, is
// stepped one step at a time.
type Leaper interface {
	// DecodeRamp returns f with, for every ctx ≥ 0,
	//
	//	f(ctx) == StepTime(&Batch{DecodeSeqs: seqs, DecodeCtx: ctx})
	//
	// exactly (the engine's results must not change when it leaps), and
	// f non-decreasing in ctx (the engine finds where the step time
	// changes by searching). nil when the model cannot promise both for
	// batches of seqs requests. Called once per batch size and
	// deployment; f is called many times and must be cheap.
	DecodeRamp(seqs int) Ramp
}

// RampOf is m's ramp for batches of seqs decoding requests, or nil when m
// cannot leap them.
func RampOf(m Model, seqs int) Ramp {
	if l, ok := m.(Leaper); ok && seqs > 0 {
		return l.DecodeRamp(seqs)
	}
	return nil
}

// DecodeRamp implements Leaper: the linear model does not read the
// context.
func (l *Linear) DecodeRamp(seqs int) Ramp {
	t := l.StepTime(&Batch{DecodeSeqs: seqs})
	return func(int64) int64 { return t }
}

// Host work (HostTimer) depends on the batch's requests, never on their
// context lengths: the wrappers below price it once per ramp.

func (s *hostSync) DecodeRamp(seqs int) Ramp {
	gpu := RampOf(s.Model, seqs)
	if gpu == nil {
		return nil
	}
	host := s.h.HostStepUS(&Batch{DecodeSeqs: seqs})
	return func(ctx int64) int64 {
		t := gpu(ctx) + host
		if t > MaxStepUS || t < 0 {
			return MaxStepUS
		}
		return t
	}
}

func (s *hostAsync) DecodeRamp(seqs int) Ramp {
	gpu := RampOf(s.Model, seqs)
	if gpu == nil {
		return nil
	}
	host := s.h.HostStepUS(&Batch{DecodeSeqs: seqs})
	if gpu(0) >= host {
		// The GPU ramp never decreases: the CPU work stays hidden under
		// every step of it, and the ramp is the GPU's as is.
		return gpu
	}
	return func(ctx int64) int64 { return max(gpu(ctx), host) }
}

func (o alphaOnly) DecodeRamp(seqs int) Ramp { return RampOf(o.Model, seqs) }
