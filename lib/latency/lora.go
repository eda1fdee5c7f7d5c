package latency

import "math"

// LoRA is a step model with LoRA adapters (docs/latency.md, "LoRA"): the
// base model's step plus the adapters' shrink and expand kernels (Punica's
// SGMV/BGMV, S-LoRA's MBGMM/MBGMV: each adapted token is multiplied by its
// adapter's A (in × rank) and B (rank × out) in every target module),
// charged as a roofline, max(FLOPs / achieved FLOP/s, bytes / achieved
// B/s), with the adapters' weights read once per step per distinct adapter;
// plus the adapter loads that run before the step's forward pass. A step
// without adapted tokens or loads is the base model's.
type LoRA struct {
	Base Model
	// FLOPsPerUS and BytesPerUS are the replica's achieved rates (all TP
	// ranks), per µs.
	FLOPsPerUS, BytesPerUS float64
}

// StepTime implements Model.
func (l *LoRA) StepTime(b *Batch) int64 {
	t := l.Base.StepTime(b)
	if b.LoRAFLOPs == 0 && b.LoRALoadUS == 0 {
		return t
	}
	t += l.KernelUS(b) + b.LoRALoadUS
	if t > MaxStepUS || t < 0 {
		return MaxStepUS
	}
	return t
}

// KernelUS is the adapters' shrink and expand time in a step.
func (l *LoRA) KernelUS(b *Batch) int64 {
	if b.LoRAFLOPs == 0 {
		return 0
	}
	return int64(math.Ceil(max(float64(b.LoRAFLOPs)/l.FLOPsPerUS, float64(b.LoRABytes)/l.BytesPerUS)))
}

// Alpha implements Model: the base model's.
func (l *LoRA) Alpha() Alpha { return l.Base.Alpha() }

// Name implements Model.
// Window implements Windowed: the adapters do not change the attention.
func (l *LoRA) Window() int32 { return WindowOf(l.Base) }

func (l *LoRA) Name() string { return l.Base.Name() + "+lora" }

// HostStepUS implements HostTimer with the base model's CPU work per step.
func (l *LoRA) HostStepUS(b *Batch) int64 {
	if h, ok := l.Base.(HostTimer); ok {
		return h.HostStepUS(b)
	}
	return 0
}

// HostTimed implements HostTimer.
func (l *LoRA) HostTimed() bool {
	h, ok := l.Base.(HostTimer)
	return ok && h.HostTimed()
}
