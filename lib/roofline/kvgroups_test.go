package roofline

import (
	"math"
	"testing"
)

// TestKVGroups checks vLLM's grouping rule (kv_cache_utils.py,
// _get_kv_cache_groups_uniform_page_size) on hand-counted layouts.
func TestKVGroups(t *testing.T) {
	for _, tc := range []struct {
		name              string
		layers, sw, w     int
		ok                bool
		size, full, slide int
	}{
		{"gpt-oss-120b: 18 full, 18 sliding", 36, 18, 128, true, 18, 1, 1},
		{"gpt-oss-20b + eagle: 13 full, 12 sliding (pad, not split)", 25, 12, 128, true, 13, 1, 1},
		{"vLLM's example: 10 full, 20 sliding", 30, 20, 4096, true, 10, 1, 2},
		{"5:1 sliding to full (Gemma 3 style)", 48, 40, 1024, true, 8, 1, 5},
		{"5:1 with a remainder: 52 sliding padded to 6 groups", 62, 52, 1024, true, 10, 1, 6},
		{"more full than sliding: 30 full, 10 sliding", 40, 10, 4096, true, 10, 3, 1},
		{"every layer slides: one group", 32, 32, 4096, false, 0, 0, 0},
		{"no window", 32, 0, 0, false, 0, 0, 0},
	} {
		a := &Arch{Layers: tc.layers, WindowLayers: tc.sw, Window: tc.w}
		g, ok := a.KVGroups()
		if ok != tc.ok || ok && (g.Size != tc.size || g.Full != tc.full || g.Slide != tc.slide || g.Window != tc.w) {
			t.Errorf("%s: got %+v %v, want size %d, %d full, %d sliding (%v)", tc.name, g, ok, tc.size, tc.full, tc.slide, tc.ok)
		}
	}
}

// TestKVHybridBlocks: gpt-oss-120b's hybrid blocks hold 18 layers, so a
// replica has twice the blocks (to the block) of the all-layer layout.
func TestKVHybridBlocks(t *testing.T) {
	a, err := LoadModel("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	g0, err := LoadGPU("h100_sxm")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(a, g0, 2)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := r.A.KVGroups()
	if !ok {
		t.Fatal("gpt-oss-120b: no hybrid layout")
	}
	tok, err := r.KVCapacityTokens(0.9)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := r.KVHybridBlocks(0.9, 16, g)
	if err != nil {
		t.Fatal(err)
	}
	if all := tok / 16; math.Abs(float64(hb)-2*float64(all)) > 2 {
		t.Errorf("gpt-oss-120b h100 tp2: %d hybrid blocks, want twice the %d all-layer blocks", hb, all)
	}
}
