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
		// ⌊(79.6·0.9 GiB − 14.96 GiB − reserve) / 128 KiB⌋ / 16, reserve
		// 0.25 + 0.18 GiB + seqs·128,256·14.2 B
		{"vllm serve's H100 limits", "h100", 0, 0, 27912, "reserve 2.17 GiB"},
		{"256 sequences, 2,048 tokens", "h100", 256, 2048, 28579, "reserve 0.86 GiB"},
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
