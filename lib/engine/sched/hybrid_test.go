package sched

import "testing"

// vllmSlide replays vLLM's SlidingWindowManager on one request: blocks
// are live (true) or freed to the null block (false).
type vllmSlide struct {
	w, B   int32
	blocks []bool
}

// allocate is allocate_slots for n more tokens after c computed:
// remove_skipped_blocks(c), then blocks up to ⌈(c+n)/B⌉.
func (v *vllmSlide) allocate(c, n int32) {
	skipped := max(0, c-v.w+1) / v.B
	for i := min(skipped, int32(len(v.blocks))) - 1; i >= 0 && v.blocks[i]; i-- {
		v.blocks[i] = false
	}
	for int32(len(v.blocks)) < (c+n+v.B-1)/v.B {
		v.blocks = append(v.blocks, true)
	}
}

func (v *vllmSlide) held() (n int32) {
	for _, b := range v.blocks {
		if b {
			n++
		}
	}
	return n
}

// TestSlideArithmetic checks slideHeld and slideMax against a replay of
// vLLM's rules, on hand-counted cases and on chunk sequences.
func TestSlideArithmetic(t *testing.T) {
	for _, tc := range []struct {
		c, n, w, B, want int32
	}{
		{0, 20, 8, 4, 5},           // a first chunk: every block of it
		{8, 8, 8, 4, 4},            // max(0, 8−7)/4 = 0 skipped
		{16, 4, 8, 4, 3},           // 9/4 = 2 skipped of ⌈20/4⌉
		{8192, 1, 128, 16, 9},      // gpt-oss decoding: (8192−127)/16 = 504 skipped of 513
		{8191, 1, 128, 16, 8},      // the step after a block left, before the next is needed
		{0, 8192, 128, 16, 512},    // an 8k prompt in one chunk
		{100, 1, 128, 16, 7},       // inside the window: all ⌈101/16⌉
		{4096, 2048, 128, 16, 136}, // a chunk past the window: (4096−127)/16 = 248 of 384
	} {
		if got := slideHeld(tc.c, tc.n, tc.w, tc.B); got != tc.want {
			t.Errorf("slideHeld(c=%d, n=%d, W=%d, B=%d) = %d, want %d", tc.c, tc.n, tc.w, tc.B, got, tc.want)
		}
		v := vllmSlide{w: tc.w, B: tc.B}
		// Reach c by the same rule in chunks of at most 512 tokens.
		for c := int32(0); c < tc.c; c += min(512, tc.c-c) {
			v.allocate(c, min(512, tc.c-c))
		}
		v.allocate(tc.c, tc.n)
		if v.held() != tc.want {
			t.Errorf("vLLM replay of (c=%d, n=%d, W=%d, B=%d) holds %d, the table says %d", tc.c, tc.n, tc.w, tc.B, v.held(), tc.want)
		}
	}
	for _, wb := range [][2]int32{{128, 16}, {8, 4}, {4096, 16}, {129, 16}, {5, 16}, {1, 1}, {17, 8}, {1024, 32}} {
		w, B := wb[0], wb[1]
		v := vllmSlide{w: w, B: B}
		var most int32
		for c := int32(0); c < 4*w+4*B; c++ {
			v.allocate(c, 1)
			if slideHeld(c, 1, w, B) != v.held() {
				t.Fatalf("W=%d B=%d decoding at c=%d: slideHeld %d, vLLM %d", w, B, c, slideHeld(c, 1, w, B), v.held())
			}
			most = max(most, v.held())
		}
		if most != slideMax(w, B) {
			t.Errorf("W=%d B=%d: a decode holds at most %d blocks, slideMax says %d", w, B, most, slideMax(w, B))
		}
	}
	// PeakBlocks bounds what a request holds over its life: prefill in
	// chunks of at most chunk tokens, then decode.
	for _, tc := range [][3]int32{{128, 16, 1}, {128, 16, 64}, {128, 16, 2048}, {8, 4, 3}, {4096, 16, 512}, {5, 16, 100}} {
		w, B, chunk := tc[0], tc[1], tc[2]
		const prompt, out = 5000, 300
		v := vllmSlide{w: w, B: B}
		var most int32
		c := int32(0)
		for ; c < prompt; c += min(chunk, prompt-c) {
			v.allocate(c, min(chunk, prompt-c))
			most = max(most, v.held())
		}
		for ; c < prompt+out; c++ {
			v.allocate(c, 1)
			most = max(most, v.held())
		}
		full := int64((prompt + out + B - 1) / B)
		if p := (&Hybrid{Window: w, Groups: 1}).PeakBlocks(full, 8192, chunk, B); int64(most) > p {
			t.Errorf("W=%d B=%d chunks of %d: a request holds %d sliding blocks, PeakBlocks says at most %d", w, B, chunk, most, p)
		}
	}
}
