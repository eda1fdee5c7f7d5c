// Package latency defines how the simulator asks for step times, and the
// models that answer: the fitted coefficient model here, the analytical
// roofline in lib/roofline.
package latency

// Batch is the composition of one engine step, as aggregates the engine keeps
// up to date incrementally. Token counts are per step, not per request.
type Batch struct {
	PrefillSeqs   int   // requests that compute a prefill chunk this step
	PrefillTokens int64 // Σ chunk lengths: prompt tokens computed this step
	PrefillCtx    int64 // Σ tokens already in KV before each chunk (cache hits and earlier chunks)
	PrefillAttn   int64 // Σ chunk·(ctx + (chunk+1)/2): causal query–key pairs of the chunks
	DecodeSeqs    int   // requests generating one token this step
	DecodeCtx     int64 // Σ KV length (prompt + generated so far) of the decoding requests
	PrefillImages int   // images of the requests whose first prefill chunk runs this step
	// Sliding-window layers (Windowed; filled by the engine only for a
	// model with a window W, else 0): what the fields above are on a layer
	// whose query at position p attends keys max(0, p−W+1)..p only.
	// PrefillAttnW is Σ over the chunks' positions of min(p+1, W) (the
	// chunks' windowed query–key pairs, WindowPairs), PrefillCtxW
	// Σ min(ctx, W−1) (the cached tokens a chunk still reads), DecodeCtxW
	// Σ min(ctx, W−1) over the decoding requests. A model reads 0 with
	// the full counterpart positive as "not given" and takes every
	// request at the batch's mean (exact for batches of equal requests,
	// and for decodes whose contexts lie all below or all past W−1:
	// DecodeCtxW = min(DecodeCtx, DecodeSeqs·(W−1)), which is how a
	// leaping ramp prices its steps).
	PrefillAttnW, PrefillCtxW, DecodeCtxW int64
	// Draft is the draft tokens each decoding request carries into this
	// step for verification (speculative decoding, spec.go); 0: none.
	Draft int32
	// LoRA adapters (lora.go): the shrink/expand FLOPs of the step's
	// adapted tokens, the bytes of the distinct adapters its requests use,
	// and the µs of the adapter loads that run before the forward pass.
	LoRAFLOPs, LoRABytes, LoRALoadUS int64
}

// ImageEncodeUS is the vision encoder's time for the images a step
// encodes: images × per-image µs, rounded (0 when the cost is unknown,
// i.e. not configured). The engine adds it to the step's time.
func ImageEncodeUS(perImageUS float64, images int) int64 {
	if images <= 0 || perImageUS <= 0 {
		return 0
	}
	return int64(perImageUS*float64(images) + 0.5)
}

// Windowed is implemented by a Model some of whose layers attend over a
// sliding window: the engine then fills Batch's windowed sums.
type Windowed interface {
	// Window is the window in tokens; 0: every layer attends over the
	// whole context.
	Window() int32
}

// WindowOf is m's sliding window in tokens, 0 when it has none.
func WindowOf(m Model) int32 {
	if w, ok := m.(Windowed); ok {
		return w.Window()
	}
	return 0
}

// WindowPairs is the query–key pairs of a chunk of n query positions
// after ctx cached ones on a layer with window w: Σ over p in
// ctx..ctx+n−1 of min(p+1, w), in closed form.
func WindowPairs(ctx, n, w int64) int64 {
	return windowPrefix(ctx+n, w) - windowPrefix(ctx, w)
}

// windowPrefix is Σ_{q=1..x} min(q, w).
func windowPrefix(x, w int64) int64 {
	if x <= w {
		return x * (x + 1) / 2
	}
	return w*(w+1)/2 + (x-w)*w
}

// Size is the number of requests in the batch.
func (b *Batch) Size() int { return b.PrefillSeqs + b.DecodeSeqs }

// Alpha holds per-request overheads that happen outside the GPU step, in µs:
// before a request enters the waiting queue (tokenisation, scheduling
// overhead) and per output token (detokenisation, streaming).
type Alpha struct {
	QueueBase          float64 `yaml:"queue_base_us"`            // α0
	QueuePerInputToken float64 `yaml:"queue_per_input_token_us"` // α1
	PerOutputToken     float64 `yaml:"per_output_token_us"`      // α2
}

// QueueDelay is the time between a request reaching an instance and entering
// its waiting queue.
func (a Alpha) QueueDelay(inputTokens int32) int64 {
	return int64(a.QueueBase + a.QueuePerInputToken*float64(inputTokens) + 0.5)
}

// Model predicts the duration of one engine step.
type Model interface {
	// StepTime returns the step duration in µs; at least 1 for a non-empty batch.
	StepTime(b *Batch) int64
	// Alpha returns the per-request overheads outside the step.
	Alpha() Alpha
	// Name says what the model is, for logs and provenance ("fitted:<file>", "roofline:<model>/<gpu>/tp<N>").
	Name() string
}

// Linear is the plain fitted form: step = β0 + β1·prefill tokens + β2·decode
// tokens, in µs. Published BLIS coefficients are of this form.
type Linear struct {
	Beta0, Beta1, Beta2 float64
	A                   Alpha
	Label               string
}

// MaxStepUS caps every model's step at 10⁶ s (11.6 days): a larger float
// would wrap in the int64 conversion (negative on amd64, so a 1 µs step),
// and millions of such steps would overflow the engine clock.
const MaxStepUS = 1_000_000_000_000

// StepTime implements Model.
func (l *Linear) StepTime(b *Batch) int64 {
	f := l.Beta0 + l.Beta1*float64(b.PrefillTokens) + l.Beta2*float64(b.DecodeSeqs)
	if !(f < MaxStepUS) {
		return MaxStepUS
	}
	t := int64(f + 0.5)
	if t < 1 {
		return 1
	}
	return t
}

// Alpha implements Model.
func (l *Linear) Alpha() Alpha { return l.A }

// Name implements Model.
func (l *Linear) Name() string {
	if l.Label != "" {
		return l.Label
	}
	return "linear"
}

// HostTimer is implemented by a Model that keeps the engine's CPU work per
// step (driving TP worker processes, scheduling, input preparation, output
// processing) apart from the GPU step StepTime returns.
type HostTimer interface {
	// HostStepUS is the step's CPU work in µs. It depends on the batch's
	// requests and tokens, never on their context lengths (PrefillCtx,
	// PrefillAttn, DecodeCtx): leaping (Leaper) prices it once per run.
	HostStepUS(b *Batch) int64
	// HostTimed reports whether HostStepUS can be non-zero; when it is
	// false the engine steps with the model alone, at no cost.
	HostTimed() bool
}

// WithHost is the model the engine steps with. vLLM's synchronous scheduler
// (before 0.14) schedules, prepares inputs and processes outputs between GPU
// steps, so a step lasts the GPU time plus the CPU work; its async scheduler
// does the CPU work of step n+1 while step n is on the GPU, so a step lasts
// the longer of the two. m itself when it has no CPU work.
func WithHost(m Model, async bool) Model {
	h, ok := m.(HostTimer)
	if !ok || !h.HostTimed() {
		return m
	}
	if async {
		return &hostAsync{m, h}
	}
	return &hostSync{m, h}
}

type hostSync struct {
	Model
	h HostTimer
}

// StepTime is the GPU step plus the CPU work around it.
func (s *hostSync) StepTime(b *Batch) int64 {
	t := s.Model.StepTime(b) + s.h.HostStepUS(b)
	if t > MaxStepUS || t < 0 {
		return MaxStepUS
	}
	return t
}

type hostAsync struct {
	Model
	h HostTimer
}

// StepTime is the longer of the GPU step and the CPU work overlapped with it.
func (s *hostAsync) StepTime(b *Batch) int64 {
	return max(s.Model.StepTime(b), s.h.HostStepUS(b))
}

// WithAlpha is m with its request-level overheads replaced by a: the API
// server's time before a request is queued and per streamed token, as a
// deployment measured it (cluster YAML latency.alpha). The step time, and
// the engine's CPU work when m reports it, stay m's.
func WithAlpha(m Model, a Alpha) Model {
	if h, ok := m.(HostTimer); ok {
		return &alphaHost{alphaOnly{m, a}, h}
	}
	return &alphaOnly{m, a}
}

type alphaOnly struct {
	Model
	a Alpha
}

func (o alphaOnly) Alpha() Alpha { return o.a }

// The wrappers keep the model's window visible.
func (s *hostSync) Window() int32  { return WindowOf(s.Model) }
func (s *hostAsync) Window() int32 { return WindowOf(s.Model) }
func (o alphaOnly) Window() int32  { return WindowOf(o.Model) }

// alphaHost keeps m's HostTimer visible to WithHost through the wrapper.
type alphaHost struct {
	alphaOnly
	h HostTimer
}

func (o alphaHost) HostStepUS(b *Batch) int64 { return o.h.HostStepUS(b) }
func (o alphaHost) HostTimed() bool           { return o.h.HostTimed() }
