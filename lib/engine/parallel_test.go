package engine

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

// TestParallelConfigErrors: bad parallel layouts are errors naming the
// file, line and key, whether the config or the model finds them.
func TestParallelConfigErrors(t *testing.T) {
	dep := func(model string, tp int, parallel string, replicas int, extra string) string {
		return "deployments:\n  - id: d\n    model: " + model + "\n    gpu: h100\n    tp: " + string(rune('0'+tp)) +
			"\n    parallel: " + parallel + "\n    latency: {mode: roofline}\n    pools: [{role: monolithic, replicas: " +
			string(rune('0'+replicas)) + extra + "}]\n"
	}
	for _, tc := range []struct{ yaml, want string }{
		{dep("qwen3-30b-a3b", 1, "{dp: 3, expert_parallel: true}", 6, ""),
			"c.yaml:6: deployments[0].parallel.expert_parallel: the EP degree dp × tp = 3 × 1 = 3 does not divide qwen3-30b-a3b's 128 routed experts"},
		{dep("llama-3.1-8b", 1, "{dp: 2, expert_parallel: true}", 2, ""),
			"c.yaml:6: deployments[0].parallel.expert_parallel: expert_parallel needs a mixture-of-experts model"},
		{dep("qwen3-30b-a3b", 1, "{dp: 4, expert_parallel: true}", 6, ""),
			"c.yaml:8: deployments[0].pools[0].replicas: each replica is one DP rank: expected a multiple of parallel.dp (4), found 6"},
		{dep("qwen3-30b-a3b", 1, "{dp: 2, expert_parallel: true, all2all_backend: deepep_low_latncy}", 2, ""),
			"c.yaml:6: deployments[0].parallel.all2all_backend: did you mean deepep_low_latency?"},
		{dep("qwen3-30b-a3b", 1, "{dp: 2, redundant_experts: 4}", 2, ""),
			"c.yaml:6: deployments[0].parallel.redundant_experts: EPLB's redundant experts need expert_parallel: true"},
		{dep("qwen3-30b-a3b", 1, "{dp: 2, expert_parallel: true, ep_size: 4}", 2, ""),
			"c.yaml:6: deployments[0].parallel.ep_size: unknown key"},
		{dep("llama-3.1-8b", 1, "{pp: 40}", 1, ""),
			"c.yaml:6: deployments[0].parallel.pp: pp 40: more pipeline stages than llama-3.1-8b's 32 layers"},
		{dep("qwen3-30b-a3b", 1, "{dp: 2, expert_parallel: true}", 2, ", max_replicas: 4, autoscaler: {target: 4}"),
			"c.yaml:8: deployments[0].pools[0].autoscaler: a pool of dp 2 ranks cannot be autoscaled"},
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
