package synth

import (
	"io"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// benchFeatures is 1,000,000 rows without DAGs using the issue-19 features:
// reasoning chains, images, correlations, an archetype, a priority
// distribution, conversational_probability and synchronized bursts.
const benchFeatures = `version: 1
seed: 1
num_requests: 1000000
aggregate_rate: 1000
prefix_groups: [{name: sys, length: 512}, {name: code, length: 2048}]
clients:
  - name: thinker
    weight: 2
    input: {dist: lognormal, mu: 5.5, sigma: 0.7, max: 8000}
    output: {dist: lognormal, mu: 5, sigma: 0.6, max: 2000}
    reasoning: {chain_length: {dist: uniform, min: 1, max: 8}, tokens_per_step: {dist: lognormal, mu: 5, sigma: 0.4}}
    priority: {dist: empirical, values: [0, 1, 2], weights: [5, 3, 2]}
  - name: vision
    weight: 2
    input: {dist: lognormal, mu: 4.5, sigma: 0.7, max: 4000}
    output: {dist: lognormal, mu: 4.5, sigma: 0.6, max: 1000}
    multimodal: {images: {dist: empirical, values: [0, 1, 2, 4], weights: [3, 5, 1, 1]}, tokens_per_image: 576}
  - name: chat
    weight: 2
    archetype: {size: small, prefix_affinity: medium, burst: low, sessions: short}
    conversational_probability: 0.7
  - name: sync
    input: 800
    output: 100
    arrival: {process: synchronized, period: 1s, offset: 0.5s, burst_size: 50, spread: 50ms}
`

func benchFeaturesRun(b *testing.B, write bool) {
	s := parse(b, benchFeatures)
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

// BenchmarkGenerateFeatures measures synthesis of benchFeatures alone.
func BenchmarkGenerateFeatures(b *testing.B) { benchFeaturesRun(b, false) }

// BenchmarkWriteFeatures adds Arrow IPC encoding.
func BenchmarkWriteFeatures(b *testing.B) { benchFeaturesRun(b, true) }
