package synth

import (
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// request_type and num_images travel from the spec through the simulator
// into the results; with image_encode_us set, image rows' first prefill
// step is longer, and a network delays every arrival at the router.
func TestRequestTypesThroughEngine(t *testing.T) {
	s := mustExample(t, "reasoning-multimodal")
	s.NumRequests = 600
	rows, _ := collect(t, s)
	run := func(encode float64, net config.Network) map[string]trace.Result {
		cfg := config.Default()
		cfg.Replicas = 2
		cfg.Engine.KVBlocks = 50000
		cfg.Latency.ImageEncodeUS = encode
		cfg.Network = net
		model := &latency.Linear{Beta0: 4000, Beta1: 0.5, Beta2: 30, Label: "test"}
		var sink resultSink
		if _, err := engine.Run(cfg, []latency.Model{model}, engine.SliceSource(rows), &sink, engine.Options{PrefixBlockSize: s.PrefixBlockSize, CheckInvariants: true}); err != nil {
			t.Fatal(err)
		}
		out := map[string]trace.Result{}
		for _, r := range sink.rs {
			out[r.ID] = r
		}
		return out
	}
	plain := run(0, config.Network{})
	slow := run(20000, config.Network{RTT: config.Duration(50 * time.Millisecond)})
	types := map[string]int{}
	for _, in := range rows {
		r := plain[in.ID]
		if r.RequestType != in.RequestType || r.NumImages != in.NumImages {
			t.Fatalf("%s: results carry %q/%d, requests %q/%d", in.ID, r.RequestType, r.NumImages, in.RequestType, in.NumImages)
		}
		types[r.RequestType]++
		if q := slow[in.ID]; q.RoutedUS < q.ArrivalUS+50000 {
			t.Fatalf("%s: routed %d, sent %d: the 50 ms RTT is missing", in.ID, q.RoutedUS, q.ArrivalUS)
		}
	}
	if types[trace.TypeReasoning] == 0 || types[trace.TypeMultimodal] == 0 || types[trace.TypeChat] == 0 || types[trace.TypeCompletion] == 0 {
		t.Fatalf("types %v", types)
	}
	// Mean TTFT of image rows grows by more than the 50 ms RTT with a 20 ms
	// per-image encoder; text rows by about the RTT.
	var dImg, dTxt, nImg, nTxt float64
	for id, p := range plain {
		d := float64(slow[id].TTFTUS - p.TTFTUS)
		if p.NumImages > 0 {
			dImg, nImg = dImg+d, nImg+1
		} else {
			dTxt, nTxt = dTxt+d, nTxt+1
		}
	}
	if dImg/nImg < dTxt/nTxt+20000 {
		t.Fatalf("image rows' TTFT grew %.0f µs, text rows' %.0f µs", dImg/nImg, dTxt/nTxt)
	}
}
