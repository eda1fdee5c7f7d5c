package engine

import (
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
