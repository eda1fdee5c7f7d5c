package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// TestLoRAConfigErrors: bad lora sections are errors naming the file, line
// and key, whether the config or the catalogue finds them.
func TestLoRAConfigErrors(t *testing.T) {
	flat := func(lora string) string {
		return "model: llama-3.1-8b\ngpu: h100\nlatency: {mode: roofline}\nlora:\n" + lora
	}
	for _, tc := range []struct{ yaml, want string }{
		{flat("  max_loras: 2\n  adapters: [{name: a, rank: 32}]\n"), "c.yaml:6: lora.adapters[0].rank: rank 32 of adapter \"a\" is above max_lora_rank 16"},
		{flat("  max_loras: 0\n  adapters: [{name: a, rank: 8}]\n"), "c.yaml:5: lora.max_loras: expected 1 to 1024"},
		{flat("  max_lora: 2\n  adapters: [{name: a, rank: 8}]\n"), "c.yaml:5: lora.max_lora: unknown key; did you mean max_loras?"},
		{flat("  adapters: [{name: a, rank: 8, target_modules: [q_prj]}]\n"), "lora.adapters[0].target_modules[0]: did you mean q_proj?"},
		{flat("  adapters: [{name: a, rank: 8}, {name: a, rank: 8}]\n"), "lora.adapters[1].name: adapter \"a\" is listed twice"},
		{flat("  max_loras: 4\n  max_cpu_loras: 2\n  adapters: [{name: a, rank: 8}]\n"), "c.yaml:6: lora.max_cpu_loras: expected 0"},
		{flat("  adapters: []\n"), "c.yaml:4: lora: expected adapters"},
		// Larger than a slot of rank max_lora_rank (16 × 81920 × 32 × 2 B = 80 MiB).
		{flat("  adapters: [{name: a, rank: 8, size_bytes: 90000000}]\n"), "c.yaml:5: lora.adapters[0].size_bytes: adapter \"a\" of 90000000 bytes is larger than a slot"},
		// 1024 slots of rank 512 (2.5 GiB each) leave no memory for KV.
		{flat("  max_loras: 1024\n  max_lora_rank: 512\n  adapters: [{name: a, rank: 8}]\n"), "c.yaml:5: lora.max_loras: 1024 adapter slots of rank 512 (2560.00 GiB per GPU) leave no room for KV blocks"},
		{"model: nosuch-model\ngpu: h100\nlatency: {beta: [1000, 10, 100]}\nengine: {kv_blocks: 100}\nlora: {adapters: [{name: a, rank: 8}]}\n",
			"c.yaml:5: lora: adapters need the model's shapes"},
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

// TestLoRASlotsFromKV: vLLM's max_loras slots of rank max_lora_rank over
// every module come out of the KV blocks: Llama 3.1 8B, Σ(in + out) over
// its seven projections 81920, 32 layers, BF16: 16·81920·32·2 B = 80 MiB
// a slot; 4 slots take ⌈320 MiB / (128 KiB·16)⌉ = 160 blocks of 16 tokens.
func TestLoRASlotsFromKV(t *testing.T) {
	base := "model: llama-3.1-8b\ngpu: h100\nlatency: {mode: roofline}\n"
	blocks := func(y string) int64 {
		c, err := config.Parse("c.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Prepare(&c); err != nil {
			t.Fatal(err)
		}
		return c.Engine.KVBlocks
	}
	without := blocks(base)
	with := blocks(base + "lora: {max_loras: 4, adapters: [{name: a, rank: 8}, {name: b, rank: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}]}\n")
	if without-with != 160 {
		t.Errorf("4 slots of rank 16 took %d KV blocks, want 160", without-with)
	}
	c, _ := config.Parse("c.yaml", []byte(base+"lora: {adapters: [{name: a, rank: 8}, {name: b, rank: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}]}\n"))
	if _, _, err := Prepare(&c); err != nil {
		t.Fatal(err)
	}
	// a: 8·(q 8192 + v 5120)·32 = 3,407,872 parameters; b: 16·81920·32.
	a, b := c.LoRA.Adapters[0], c.LoRA.Adapters[1]
	if a.FLOPs != 2*3407872 || a.Bytes != 2*3407872 || b.Bytes != 16*81920*32*2 {
		t.Errorf("adapters: a %d FLOPs %d bytes, b %d bytes", a.FLOPs, a.Bytes, b.Bytes)
	}
	if c.LoRA.HostGBps != 64 {
		t.Errorf("host link %g GB/s, want the H100's 64", c.LoRA.HostGBps)
	}
}

// loraRun runs n requests over adapters a0..a(k-1) in turn on two replicas
// with one slot each, under routing.
func loraRun(t *testing.T, routing string, n, k int, lora func(i int) string) []row.Result {
	t.Helper()
	c := testConfig()
	c.Replicas = 2
	c.Router.Routing = routing
	c.Engine.MaxNumSeqs = 8
	l := &config.LoRA{MaxLoras: 1, MaxLoraRank: 16, HostGBps: 1}
	for i := 0; i < k; i++ {
		l.Adapters = append(l.Adapters, config.Adapter{Name: fmt.Sprintf("a%d", i), Rank: 8, Bytes: 2e6, FLOPs: 1e6})
	}
	c.LoRA = l
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var reqs []row.Request
	for i := 0; i < n; i++ {
		r := req(fmt.Sprintf("r%d", i), int64(i)*3000, 64, 16)
		r.LoRA = lora(i)
		reqs = append(reqs, r)
	}
	sink := &memSink{}
	models := testModel(c)
	if _, err := Run(c, loraModels(models), SliceSource(reqs), sink, Options{CheckInvariants: true}); err != nil {
		t.Fatal(err)
	}
	return sink.rs
}

// TestLoRAAffinity: two adapters, two replicas with one slot each.
// Least-loaded spreads each adapter over both replicas, which swap
// adapters (2 ms loads) and hold requests back while the other adapter
// runs; lora-affinity keeps each adapter on one replica.
func TestLoRAAffinity(t *testing.T) {
	mean := func(rs []row.Result) float64 {
		s := 0.0
		for _, r := range rs {
			if r.Status != row.StatusCompleted {
				t.Fatalf("%s: %s", r.ID, r.Status)
			}
			s += float64(r.TTFTUS)
		}
		return s / float64(len(rs))
	}
	by := func(i int) string { return fmt.Sprintf("a%d", (i/3)%2) }
	ll, la := mean(loraRun(t, "least-loaded", 60, 2, by)), mean(loraRun(t, "lora-affinity", 60, 2, by))
	if !(la < ll) {
		t.Errorf("mean TTFT: lora-affinity %.0f µs, least-loaded %.0f µs; want affinity faster", la, ll)
	}
	t.Logf("mean TTFT: lora-affinity %.0f µs, least-loaded %.0f µs", la, ll)
}

// TestLoRAUnknownAdapter: a request naming an adapter the registry lacks
// is an input error naming its row.
func TestLoRAUnknownAdapter(t *testing.T) {
	c := testConfig()
	c.LoRA = &config.LoRA{MaxLoras: 1, MaxLoraRank: 16, Adapters: []config.Adapter{{Name: "a", Rank: 8}}}
	reqs := []row.Request{req("r0", 0, 16, 4), req("r1", 10, 16, 4)}
	reqs[0].LoRA, reqs[1].LoRA = "a", "sql"
	_, err := Run(c, loraModels(testModel(c)), SliceSource(reqs), &memSink{}, Options{})
	var re *row.RowError
	if !errors.As(err, &re) || re.Row != 2 || !strings.Contains(err.Error(), `column lora: adapter "sql" is not in the lora registry of deployment`) {
		t.Fatalf("got %v, want a row error for row 2", err)
	}
}

func loraModels(ms []latency.Model) []latency.Model {
	out := make([]latency.Model, len(ms))
	for i, m := range ms {
		out[i] = &latency.LoRA{Base: m, FLOPsPerUS: 1e4, BytesPerUS: 1e4}
	}
	return out
}
