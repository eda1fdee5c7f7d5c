package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

func TestPrepareFillsKVBlocks(t *testing.T) {
	c := config.Default()
	m, why, err := Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine.KVBlocks < 1000 || len(m) != 1 || !strings.Contains(why[0], "KV:") {
		t.Fatalf("kv blocks %d, why %q", c.Engine.KVBlocks, why)
	}
	c = testConfig()
	if _, why, err := Prepare(&c); err != nil || c.Engine.KVBlocks != 1000 || !strings.Contains(why[0], "linear") {
		t.Fatalf("explicit kv_blocks and beta: %v %d %q", err, c.Engine.KVBlocks, why)
	}
}

// KV blocks from memory follow vLLM's profiling run: the engine's batch
// limits size the reserve, and a GPU file's reserved_gib fixes it
// (docs/latency.md, "KV capacity: vLLM's memory profile").
func TestPrepareKVBlocksFollowLimits(t *testing.T) {
	gpu := filepath.Join(t.TempDir(), "h100-fixed.yaml")
	yaml := "name: h100-fixed\nbf16_tflops: 989.5\nhbm_tb_s: 3.35\nmemory_gib: 79.6\nlink_gb_s: 450\nefficiency:\n  reserved_gib: 1.2\n"
	if err := os.WriteFile(gpu, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		gpu          string
		seqs, tokens int
		want         int64
		reserve      string
	}{
		// ⌊(79.19·0.9 GiB − 14.96 GiB − reserve) / 128 KiB⌋ / 16, reserve
		// 0.25 + 0.18 GiB + seqs·128,256·14.2 B
		{"vllm serve's H100 limits", "h100", 0, 0, 27723, "reserve 2.17 GiB"},
		{"256 sequences, 2,048 tokens", "h100", 256, 2048, 28390, "reserve 0.86 GiB"},
		{"reserved_gib 1.2", gpu, 0, 0, 28407, "reserved_gib 1.20 GiB"},
	} {
		cfg := config.Default()
		cfg.GPU, cfg.Engine.MaxNumSeqs, cfg.Engine.MaxNumBatchedTokens = c.gpu, c.seqs, c.tokens
		cfg.Latency.Mode = "roofline"
		_, why, err := Prepare(&cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.Engine.KVBlocks != c.want || !strings.Contains(why[0], c.reserve) {
			t.Errorf("%s: %d KV blocks, want %d; why %q, want %q", c.name, cfg.Engine.KVBlocks, c.want, why[0], c.reserve)
		}
	}
}

// The hybrid KV layout is the model's, however the model is named: its
// catalogue name and the config.json it was read from give the same layout
// and KV blocks, for the flat form and for a deployment, and a pool on
// hardware of its own keeps it.
func TestPrepareKVLayoutFromModel(t *testing.T) {
	path := filepath.Join("..", "roofline", "models", "gpt-oss-120b", "config.json")
	var blocks []int64
	for _, model := range []string{"gpt-oss-120b", path} {
		c := config.Default()
		c.Model, c.GPU, c.TP = model, "h100", 2
		c.Latency.Mode = "roofline"
		_, why, err := Prepare(&c)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		d := c.Resolved()[0]
		g, ok := d.HybridKV()
		if !ok || g.Full != 1 || g.Slide != 1 || g.Size != 18 || g.Window != 128 || !strings.Contains(why[0], "hybrid KV cache: 1 full + 1 sliding-window (128 tokens) groups of 18 layers") {
			t.Fatalf("%s: layout %+v %v; why %q", model, g, ok, why[0])
		}
		blocks = append(blocks, c.Engine.KVBlocks)
	}
	if blocks[0] != blocks[1] {
		t.Fatalf("KV blocks by name %d, by config.json %d", blocks[0], blocks[1])
	}
	// Without windows there is no layout; turned off, none is kept.
	c := config.Default()
	if _, _, err := Prepare(&c); err != nil || c.Engine.KVLayout != nil {
		t.Fatalf("llama: layout %+v, %v", c.Engine.KVLayout, err)
	}
	c = config.Default()
	c.Model, c.GPU, c.TP, c.Engine.DisableHybridKVCacheManager = path, "h100", 2, true
	c.Latency.Mode = "roofline"
	if _, _, err := Prepare(&c); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Resolved()[0].HybridKV(); ok || 2*c.Engine.KVBlocks > blocks[0]+1 {
		t.Fatalf("disabled: layout kept %v, %d blocks against %d with it", ok, c.Engine.KVBlocks, blocks[0])
	}
	// A deployment with a pool on other hardware: both views keep it.
	c = config.Default()
	e := c.Engine
	c.Model, c.GPU, c.TP, c.Replicas = "", "", 0, 0
	c.Deployments = []config.Deployment{{ID: "oss", Model: path, GPU: "h100", TP: 2, Engine: e, Latency: config.Latency{Mode: "roofline"},
		Pools: []config.Pool{{Role: "monolithic", Replicas: 1}, {Role: "monolithic", Replicas: 1, GPU: "h200"}}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(&c); err != nil {
		t.Fatal(err)
	}
	d := c.Deployments[0]
	if _, ok := d.HybridKV(); !ok {
		t.Fatal("deployment lost its layout")
	}
	h200 := config.Default()
	h200.Model, h200.GPU, h200.TP = path, "h200", 2
	h200.Latency.Mode = "roofline"
	if _, _, err := Prepare(&h200); err != nil {
		t.Fatal(err)
	}
	if x := d.ForPool(1); x.Engine.KVLayout == nil || d.Pools[1].Engine == nil || d.Pools[1].Engine.KVBlocks != h200.Engine.KVBlocks {
		t.Fatalf("h200 pool: layout %v, engine %+v; want %d blocks", x.Engine.KVLayout, d.Pools[1].Engine, h200.Engine.KVBlocks)
	}
}
