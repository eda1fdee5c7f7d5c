package fit

import (
	"testing"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
)

func TestPointEngineLimits(t *testing.T) {
	p := measure.ServingPoint{InputTokens: 1024, OutputTokens: 128, Concurrency: 16}
	for _, tc := range []struct {
		name               string
		dep                Deployment
		p                  measure.ServingPoint
		wantSeqs, wantToks int
	}{
		{"benchmark rule", Deployment{}, p, 16, 16 + 1024 + 1500},
		{"long prompts", Deployment{}, measure.ServingPoint{InputTokens: 8192, OutputTokens: 1024, Concurrency: 64}, 64, 64 + 8192 + 1500},
		{"batched tokens given", Deployment{MaxNumBatchedTokens: 8192}, p, 16, 8192},
		{"seqs given", Deployment{MaxNumSeqs: 256}, p, 256, 16 + 1024 + 1500},
		{"both given", Deployment{MaxNumSeqs: 32, MaxNumBatchedTokens: 4096}, p, 32, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.dep.Model, tc.dep.GPU, tc.dep.TP = "llama-3.1-8b", "h100", 1
			s, err := NewSetup(tc.dep)
			if err != nil {
				t.Fatal(err)
			}
			e := s.PointEngine(tc.p).Engine
			if e.MaxNumSeqs != tc.wantSeqs || e.MaxNumBatchedTokens != tc.wantToks {
				t.Errorf("max_num_seqs %d, max_num_batched_tokens %d; want %d, %d", e.MaxNumSeqs, e.MaxNumBatchedTokens, tc.wantSeqs, tc.wantToks)
			}
			if s.Engine.Engine.MaxNumBatchedTokens == e.MaxNumBatchedTokens && tc.dep.MaxNumBatchedTokens == 0 {
				t.Errorf("PointEngine changed nothing: the setup's own engine has %d batched tokens", e.MaxNumBatchedTokens)
			}
		})
	}
}

// Under vLLM's default 8,192-token budget the eight simultaneous 1,024-token
// prompts of the first round share one step, so they get the same first
// token time; under the measured runs' budget (C + ISL + 1500) at most two
// fit in a step, and first tokens come out over at least four steps.
func TestBenchmarkLimitsSpreadTheBurst(t *testing.T) {
	s, err := NewSetup(Deployment{Model: "llama-3.1-8b", GPU: "h100", TP: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := measure.ServingPoint{InputTokens: 1024, OutputTokens: 16, Concurrency: 8}
	model := &latency.Linear{Beta0: 5000, Beta1: 20, Beta2: 50}
	firstRound := func(run Runner) map[int64]int {
		out, err := run(model, ClosedLoopRequests(p, 2))
		if err != nil {
			t.Fatal(err)
		}
		ttfts := map[int64]int{}
		for _, o := range out {
			if len(o.ID) > 2 && o.ID[len(o.ID)-2:] == "-0" {
				ttfts[o.TTFTus]++
			}
		}
		return ttfts
	}
	if d := firstRound(EngineRunner(s.Engine)); len(d) != 1 {
		t.Fatalf("default engine: first-round TTFTs %v, want one value (one shared prefill step)", d)
	}
	if d := firstRound(EngineRunner(s.PointEngine(p))); len(d) < 4 {
		t.Errorf("benchmark limits: first-round TTFTs %v, want at least 4 distinct values", d)
	}
}
