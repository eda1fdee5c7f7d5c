package kv

import "testing"

// TestTierLinkShared: copies into a tier and loads out of it share its
// link, first come first served, so heavy offloading delays a reload.
// Blocks of 1,000 B over 10 B/µs take 100 µs each, plus 5 µs a transfer.
func TestTierLinkShared(t *testing.T) {
	spec := []TierSpec{{Name: "cpu", Blocks: 1000, BytesUS: 10, LatencyUS: 5}}
	for _, tc := range []struct {
		name      string
		offloads  int   // blocks copied in at time 0 besides the two loaded later
		loadAt    int64 // when those two are loaded
		wantReady int64
	}{
		// The copies in at 0 are one transfer: 5 + (offloads + 2) × 100.
		{"little offload traffic", 0, 1000, 1000 + 5 + 200},
		{"30 blocks offloaded just before", 30, 0, (5 + 3200) + 5 + 200},
		{"30 blocks offloaded, link still busy", 30, 1000, (5 + 3200) + 5 + 200},
		{"30 blocks offloaded, link free again", 30, 4000, 4000 + 5 + 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := NewTiers(spec, OffloadEager, 0, 1000, NewPaged(100, 16))
			ts.SetNow(0, 0)
			ts.Cached(1)
			ts.Cached(2)
			for k := 0; k < tc.offloads; k++ {
				ts.Cached(uint64(100 + k))
			}
			ts.SetNow(tc.loadAt, 0)
			per := make([]int32, 1)
			ready, _ := ts.Load([]uint64{1, 2}, tc.loadAt, per)
			if ready != tc.wantReady || per[0] != 2 {
				t.Fatalf("ready at %d (%d blocks), want %d", ready, per[0], tc.wantReady)
			}
			if got, want := ts.T[0].Stats.OffloadUS, int64(5+100*(tc.offloads+2)); got != want {
				t.Fatalf("offload link time %d, want %d", got, want)
			}
		})
	}
}
