package synth

import (
	"io"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// benchSpec is 1,000,000 requests of a realistic mix: single requests with a
// shared system prompt, multi-turn chats with growing context, and a ReAct agent.
const benchSpec = `version: 1
seed: 1
num_requests: 1000000
aggregate_rate: 1000
prefix_groups: [{name: sys, length: 512}]
tools: {search: {latency: {dist: lognormal, mu: -1, sigma: 0.5}, output_tokens: {dist: uniform, min: 100, max: 400}}}
clients:
  - name: api
    weight: 5
    tenant_id: acme
    slo_class: interactive
    model: llama-3.1-8b
    streaming: 0.9
    input: {dist: lognormal, mu: 6, sigma: 0.7, max: 8000}
    output: {dist: lognormal, mu: 5, sigma: 0.6, max: 2000}
    prefix: {reuse_probability: 0.7}
  - name: chat
    weight: 1
    tenant_id: consumer
    model: llama-3.1-8b
    input: {dist: lognormal, mu: 4.5, sigma: 0.8, max: 2000}
    output: {dist: lognormal, mu: 5, sigma: 0.6, max: 1000}
    arrival: {process: gamma, cv: 2}
    conversation: {turns: {dist: uniform, min: 1, max: 6}, think_time: {dist: exponential, mean: 5}, context_growth: accumulate}
  - name: agent
    weight: 0.2
    tenant_id: agents
    model: llama-3.1-8b
    prefix: {groups: [sys]}
    agentic:
      steps:
        - {id: think, type: llm_call, input: {dist: uniform, min: 50, max: 200}, output: {dist: uniform, min: 20, max: 100}, context_growth: accumulate}
        - {id: act, type: tool_call, tool: search, depends_on: [think]}
        - {id: answer, type: llm_call, input: 50, output: 300, depends_on: [act]}
      loop: {over: [think, act], max_iterations: 6, iterations: {dist: uniform, min: 1, max: 6}}
`

func benchRun(b *testing.B, write bool) {
	s := parse(b, benchSpec)
	b.ReportAllocs()
	var rows int64
	for b.Loop() {
		var st Stats
		var err error
		if write {
			st, err = Write(s, "-", io.Discard, Meta(s, nil, nil))
		} else {
			st, err = Generate(s, func(*trace.Request) error { return nil })
		}
		if err != nil {
			b.Fatal(err)
		}
		rows += st.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
}

// BenchmarkGenerate measures synthesis alone (rows handed to a no-op).
func BenchmarkGenerate(b *testing.B) { benchRun(b, false) }

// BenchmarkWrite measures synthesis plus Arrow IPC encoding to io.Discard.
func BenchmarkWrite(b *testing.B) { benchRun(b, true) }
