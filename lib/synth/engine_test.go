package synth

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

type resultSink struct{ rs []trace.Result }

func (s *resultSink) Write(r *trace.Result) error {
	c := *r
	s.rs = append(s.rs, c)
	return nil
}

// Every example runs through the simulator; no row starts before all its
// parents finish (plus its delay), fan-in rows run exactly once, and every
// session's terminal steps complete.
func TestExamplesThroughEngine(t *testing.T) {
	for _, n := range Examples() {
		t.Run(n, func(t *testing.T) {
			s := mustExample(t, n)
			s.NumRequests = 1500
			rows, _ := collect(t, s)
			cfg := config.Default()
			cfg.Replicas = 2
			cfg.Engine.KVBlocks = 50000
			var model latency.Model = &latency.Linear{Beta0: 4000, Beta1: 0.5, Beta2: 30, Label: "test"}
			// A workload with LoRA adapters runs on a registry of them.
			seen := map[string]bool{}
			for _, r := range rows {
				if r.LoRA != "" && !seen[r.LoRA] {
					if cfg.LoRA == nil {
						cfg.LoRA = &config.LoRA{MaxLoras: 2, MaxLoraRank: 16, HostGBps: 64}
						model = &latency.LoRA{Base: model, FLOPsPerUS: 1e8, BytesPerUS: 3e6}
					}
					seen[r.LoRA] = true
					cfg.LoRA.Adapters = append(cfg.LoRA.Adapters, config.Adapter{Name: r.LoRA, Rank: 16, Bytes: 27e6, FLOPs: 27e6})
				}
			}
			var sink resultSink
			sum, err := engine.Run(cfg, []latency.Model{model}, engine.SliceSource(rows), &sink, engine.Options{PrefixBlockSize: s.PrefixBlockSize, CheckInvariants: true})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Injected != int64(len(rows)) || sum.Completed != int64(len(rows)) {
				t.Fatalf("%d rows, summary %+v", len(rows), sum)
			}
			byID := map[string]*trace.Result{}
			for i := range sink.rs {
				r := &sink.rs[i]
				if byID[r.ID] != nil {
					t.Fatalf("%s finished twice", r.ID)
				}
				byID[r.ID] = r
			}
			for _, r := range sink.rs {
				if r.Status != trace.StatusCompleted {
					t.Fatalf("%s: %s", r.ID, r.Status)
				}
				var ready int64
				for _, d := range r.DependsOn {
					ready = max(ready, byID[d].FinishedUS)
				}
				if len(r.DependsOn) == 0 {
					continue
				}
				start := r.ArrivalUS
				if r.Kind == trace.KindLLM && start < ready+r.DelayUS {
					t.Fatalf("%s starts at %d, parents finish at %d, delay %d", r.ID, start, ready, r.DelayUS)
				}
				if r.Kind == trace.KindTool && (start < ready || r.FinishedUS != start+r.DelayUS) {
					t.Fatalf("tool %s: start %d (parents %d), finished %d, latency %d", r.ID, start, ready, r.FinishedUS, r.DelayUS)
				}
			}
			if n == "chat-multiturn" && sum.CachedTokens == 0 {
				t.Fatal("conversation context never hit the prefix cache")
			}
		})
	}
}
