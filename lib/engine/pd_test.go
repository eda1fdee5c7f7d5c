package engine

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

// pdBase is a P/D deployment of Llama-3.1-8B on H100s; cases append keys.
const pdBase = `deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
`

// TestPDConfigErrors: bad heterogeneous, selective and encode configs are
// errors naming the file, line and key (Parse, or Prepare for what only the
// catalogue knows).
func TestPDConfigErrors(t *testing.T) {
	pd := "    pools:\n      - {role: prefill, replicas: 1, gpu: h200, tp: 2}\n      - {role: decode, replicas: 1}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"pool gpu not in the catalogue", pdBase + "    pools:\n      - {role: prefill, replicas: 1, gpu: h900}\n      - {role: decode, replicas: 1}\n",
			`c.yaml:6: deployments[0].pools[0].gpu: did you mean h100? (gpu "h900": not built in`},
		{"pool gpu not in the catalogue, linear model", pdBase + "    latency: {beta: [1, 1, 1]}\n    engine: {kv_blocks: 10}\n    pools:\n      - {role: prefill, replicas: 1, gpu: b300}\n      - {role: decode, replicas: 1}\n",
			`c.yaml:8: deployments[0].pools[0].gpu: did you mean b200? (gpu "b300": not built in`},
		{"pool engine key typo", pdBase + "    pools:\n      - {role: prefill, replicas: 1, engine: {max_num_seq: 8}}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:6: deployments[0].pools[0].engine.max_num_seq: unknown key; did you mean max_num_seqs?"},
		{"pool key typo", pdBase + "    pools:\n      - {role: prefill, replicas: 1, gpus: h200}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:6: deployments[0].pools[0].gpus: unknown key; did you mean gpu?"},
		{"pool block size", pdBase + "    pools:\n      - {role: prefill, replicas: 1, engine: {block_size: 32}}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:6: deployments[0].pools[0].engine.block_size: a pool keeps its deployment's block size (16"},
		{"pool engine limits", pdBase + "    pools:\n      - {role: prefill, replicas: 1}\n      - {role: decode, replicas: 1, engine: {max_num_seqs: 9000}}\n",
			"deployments[0].pools[1].engine.max_num_seqs: 9000 is more than the token budget, vllm serve's default on h100 (8192)"},
		{"pool tp", pdBase + "    pools:\n      - {role: prefill, replicas: 1, tp: -2}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:6: deployments[0].pools[0].tp: expected >= 1"},
		{"pool latency mode", pdBase + "    pools:\n      - {role: prefill, replicas: 1, latency: {mode: fast}}\n      - {role: decode, replicas: 1}\n",
			"c.yaml:6: deployments[0].pools[0].latency.mode: expected auto, roofline, fitted or linear"},
		{"decider typo", pdBase + pd + "    pd: {decider: prefix-treshold}\n",
			"c.yaml:8: deployments[0].pd.decider: did you mean prefix-threshold?"},
		{"decider on monolithic", pdBase + "    pools: [{role: monolithic, replicas: 1}]\n    pd: {decider: never}\n",
			"c.yaml:6: deployments[0].pd: only used by a deployment with prefill and decode pools"},
		{"negative threshold", pdBase + pd + "    pd: {decider: prefix-threshold, threshold: -1}\n",
			"c.yaml:8: deployments[0].pd.threshold: expected uncached prompt tokens >= 0"},
		{"decider with prefill-first", pdBase + pd + "    pd: {decider: prefix-threshold}\n    kv_transfer: {routing: prefill-first}\n",
			"c.yaml:8: deployments[0].pd.decider: decider prefix-threshold reads the decode replica's cache before the prefill is placed"},
		{"bad sharing", pdBase + pd + "    kv_transfer: {sharing: equal}\n",
			`c.yaml:8: deployments[0].kv_transfer.sharing: expected fifo or fair, found "equal"`},
		{"fair and stream", pdBase + pd + "    kv_transfer: {sharing: fair, granularity: stream}\n",
			"deployments[0].kv_transfer.sharing: fair sharing times each transfer as a flow"},
		{"encode without section", pdBase + "    pools: [{role: encode, replicas: 1}, {role: monolithic, replicas: 1}]\n    latency: {image_encode_us: 1000}\n",
			"c.yaml:2: deployments[0]: an encode pool needs encode: {tokens_per_image: N}"},
		{"encode without encoder time", pdBase + "    pools: [{role: encode, replicas: 1}, {role: monolithic, replicas: 1}]\n    encode: {tokens_per_image: 576}\n",
			"c.yaml:5: deployments[0].pools[0]: an encode pool needs latency.image_encode_us"},
		{"encode alone", pdBase + "    pools: [{role: encode, replicas: 1, latency: {image_encode_us: 1000}}]\n    encode: {tokens_per_image: 576}\n",
			"deployments[0].pools: an encode pool encodes images for a monolithic or prefill pool"},
		{"encode tokens", pdBase + "    pools: [{role: encode, replicas: 1, latency: {image_encode_us: 1000}}, {role: monolithic, replicas: 1}]\n    encode: {tokens_per_image: 0}\n",
			"c.yaml:6: deployments[0].encode.tokens_per_image: expected the image tokens in the prompt"},
		{"planner on a monolithic pool", pdBase + "    pools: [{role: monolithic, replicas: 1, max_replicas: 2, autoscaler: {policy: planner}}]\n",
			"c.yaml:5: deployments[0].pools[0].autoscaler.policy: the planner sizes prefill and decode pools"},
		{"planner without itl", pdBase + "    pools:\n      - {role: prefill, replicas: 1, max_replicas: 2, autoscaler: {policy: planner}}\n      - {role: decode, replicas: 1, max_replicas: 2, autoscaler: {policy: planer}}\n",
			"c.yaml:7: deployments[0].pools[1].autoscaler.policy: did you mean planner?"},
		{"planner decode without itl", pdBase + "    pools:\n      - {role: prefill, replicas: 1, max_replicas: 2, autoscaler: {policy: planner}}\n      - {role: decode, replicas: 1, max_replicas: 2, autoscaler: {policy: planner}}\n",
			"c.yaml:7: deployments[0].pools[1].autoscaler: the planner sizes a decode pool for an inter-token latency: set slo.itl"},
		{"autoscaled encode pool", pdBase + "    pools:\n      - {role: encode, replicas: 1, max_replicas: 2, latency: {image_encode_us: 1000}, autoscaler: {policy: hpa, target: 2}}\n      - {role: monolithic, replicas: 1}\n    encode: {tokens_per_image: 576}\n",
			"c.yaml:6: deployments[0].pools[0].autoscaler: an encode pool cannot be autoscaled"},
		{"encode on a deployment without one", pdBase + "    pools: [{role: monolithic, replicas: 1}]\n    encode: {tokens_per_image: 576}\n",
			"c.yaml:6: deployments[0].encode: only used by a deployment with an encode pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("c.yaml", []byte(tc.yaml))
			if err == nil {
				_, _, err = Prepare(&c)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHeterogeneousPools: each pool with hardware of its own gets its own
// latency model and KV size (from its GPU and TP), its engine keys merged
// over the deployment's, its own link default, and the printed config reads
// back to the same.
func TestHeterogeneousPools(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(pdBase+`    tp: 1
    engine: {max_num_seqs: 128}
    pools:
      - {role: prefill, replicas: 2, gpu: h200, tp: 2, engine: {max_num_batched_tokens: 16384}}
      - {role: decode, replicas: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	models, why, err := Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 || !strings.Contains(why[1], "d pool 0 (prefill)") || !strings.Contains(models[1].Name(), "h200") || !strings.Contains(models[1].Name(), "tp2") {
		t.Fatalf("models %d, why %q, pool model %s", len(models), why, models[1].Name())
	}
	d := c.Deployments[0]
	p, dec := d.Pools[0], d.Pools[1]
	if p.Engine == nil || p.Engine.MaxNumSeqs != 128 || p.Engine.MaxNumBatchedTokens != 16384 || p.Engine.KVBlocks <= d.Engine.KVBlocks {
		t.Fatalf("prefill engine %+v (deployment's %d blocks)", p.Engine, d.Engine.KVBlocks)
	}
	if p.LinkGBs != 100 || dec.LinkGBs != 50 || d.KVTransfer.BandwidthGBs != nil {
		t.Fatalf("links: prefill %g, decode %g GB/s, deployment %v", p.LinkGBs, dec.LinkGBs, d.KVTransfer.BandwidthGBs)
	}
	c2, err := config.Parse("printed", []byte(c.YAML()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(&c2); err != nil {
		t.Fatal(err)
	}
	if c2.YAML() != c.YAML() {
		t.Fatalf("printed config does not read back:\n%s\nvs\n%s", c.YAML(), c2.YAML())
	}
}
