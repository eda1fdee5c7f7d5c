package latency

// VLLMQueueBaseUS is vLLM's default α0, µs: the request path outside the GPU
// step that no latency model times — the client's send, the API server
// (HTTP, request validation, tokenisation), the hand-off to the engine core
// and, on the way back, the first token's output processing and streaming.
// Measured on public runs (docs/latency.md, "The first-token path (issue
// 27)"): inference-perf's open-loop runs of four models on H100 put it at
// 7–9 ms (the simulator's p50 TTFT 20% fast without it, held out model by
// model), aiconfigurator's closed-loop points at 1–4 ms (their median TTFT
// error falls from 16% to 14% up to 4 ms and rises past it); 4 ms keeps the
// closed-loop points inside issue 16's bounds and halves the open-loop gap.
// A deployment that measured its own sets latency.alpha; blis-calibrate
// fits one from open-loop stages or closed-loop points.
const VLLMQueueBaseUS = 4000

// DefaultAlpha is the serving engine's request-level time outside the GPU
// step when the deployment has not measured its own (vLLM: α0
// VLLMQueueBaseUS, no per-token terms).
func DefaultAlpha() Alpha { return Alpha{QueueBase: VLLMQueueBaseUS} }
