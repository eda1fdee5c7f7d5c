package engine

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

// TestSpeculativeConfigErrors: bad speculative sections are errors naming
// the file, line and key, whether the config or the catalogue finds them.
func TestSpeculativeConfigErrors(t *testing.T) {
	flat := func(model, spec string) string {
		return "model: " + model + "\ngpu: h100\nlatency: {mode: roofline}\nspeculative: " + spec + "\n"
	}
	for _, tc := range []struct{ yaml, want string }{
		{flat("qwen3-32b", "{method: eagel3}"), "c.yaml:4: speculative.method: did you mean eagle3?"},
		{flat("qwen3-32b", "{method: draft_model}"), "c.yaml:4: speculative: method draft_model needs model"},
		{flat("qwen3-32b", "{method: eagle, model: qwen3-1.7b}"), "c.yaml:4: speculative.model: only method draft_model runs a draft model"},
		{flat("qwen3-32b", "{method: ngram, num_speculative_tokens: 0}"), "c.yaml:4: speculative.num_speculative_tokens: expected 1 to 32, found 0"},
		{flat("qwen3-32b", "{method: ngram, acceptance_rate: 1.2}"), "c.yaml:4: speculative.acceptance_rate: expected an acceptance probability in [0, 1], found 1.2"},
		{flat("qwen3-32b", "{method: ngram, acceptance_by_class: {code: -0.1}}"), "c.yaml:4: speculative.acceptance_by_class.code: expected an acceptance probability"},
		{flat("qwen3-32b", "{method: ngram, draft_step_us: 50}"), "c.yaml:4: speculative.draft_step_us: ngram proposes on the CPU"},
		{flat("qwen3-32b", "{method: ngram, disable_by_batchsize: 4}"), "c.yaml:4: speculative.disable_by_batchsize: unknown key"},
		{flat("qwen3-32b", "{method: draft_model, model: qwen3-17b}"), "c.yaml:4: speculative.model: "},
		// A draft model whose weights leave no KV room next to the target.
		{flat("qwen3-32b", "{method: draft_model, model: qwen3-14b}"), "c.yaml:4: speculative.method: the draft's weights (27.5"},
		{"model: qwen3-32b\ngpu: h100\nlatency: {beta: [1000, 10, 100]}\nengine: {kv_blocks: 100}\nspeculative: {method: eagle}\n",
			"c.yaml:5: speculative.method: eagle: the target's architecture is unknown"},
		// A P/D pool on hardware of its own would need its own draft.
		{"deployments:\n  - id: d\n    model: qwen3-32b\n    gpu: h100\n    speculative: {method: ngram}\n    pools:\n      - {role: prefill, replicas: 1, gpu: h200}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:5: deployments[0].speculative: speculative decoding with a pool on hardware of its own (pools[0]) is not modelled"},
	} {
		c, err := config.Parse("c.yaml", []byte(tc.yaml))
		if err == nil {
			_, _, err = Prepare(&c)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\ngot  %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
