package engine

import (
	"errors"
	"fmt"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
)

// prepareSpec wraps a deployment's step model with speculative decoding
// (docs/latency.md, "Speculative decoding"): the target verifies k drafts
// per decoding request, and the proposer's passes are timed by the
// draft model's roofline (draft_model), a one-layer head of the target's
// shape on its GPU (eagle, eagle3), a fixed draft_step_us, or nothing
// (ngram). The draft's weights and KV come out of the target's KV blocks
// when those are computed from GPU memory (kvFromMemory).
func prepareSpec(cfg *config.Cluster, i int, d *config.Deployment, res *resolve.Resolved, target latency.Model, kvFromMemory bool) (latency.Model, string, error) {
	s := d.Speculative
	if s == nil {
		return target, "", nil
	}
	key := func(k string) string { return cfg.DeploymentKey(i, "speculative."+k) }
	sm := &latency.Speculative{Target: target, Label: fmt.Sprintf("%s(k=%d)", s.Method, s.NumSpeculativeTokens)}
	var draft *roofline.Roofline
	var draftWeights float64 // bytes per GPU
	if s.Method != config.SpecNgram && (s.DraftStepUS == 0 || kvFromMemory) {
		if res == nil || res.Roofline == nil {
			return nil, "", errors.New(cfg.Where(key("method"), fmt.Sprintf("%s: the target's architecture is unknown (a linear latency model with kv_blocks set): set speculative.draft_step_us", s.Method)))
		}
		switch s.Method {
		case config.SpecDraftModel:
			dr, err := resolve.Resolve(resolve.Spec{Mode: "roofline", Model: s.Model, GPU: d.GPU, TP: d.TP, KVDtype: d.KVDtype})
			if err != nil {
				return nil, "", errors.New(cfg.Where(key("model"), err.Error()))
			}
			draft = dr.Roofline
			draftWeights = draft.WeightBytesPerRank()
		default:
			head, err := eagleHead(res.Roofline)
			if err != nil {
				return nil, "", errors.New(cfg.Where(key("method"), err.Error()))
			}
			draft = head
			// The head shares the target's embedding and LM head.
			draftWeights = head.WeightBytesPerRank() - head.A.EmbedParams()*head.A.ActDtype.Bytes()/float64(head.TP)
		}
	}
	why := fmt.Sprintf("; speculative %s: k=%d, α=%g (%.3g tokens per step)", s.Method, s.NumSpeculativeTokens, s.AcceptanceRate,
		latency.ExpectedTokens(s.AcceptanceRate, s.NumSpeculativeTokens))
	switch {
	case s.DraftStepUS > 0:
		sm.Draft = &latency.Linear{Beta0: s.DraftStepUS, Label: "draft_step_us"}
		why += fmt.Sprintf(", draft pass %g µs", s.DraftStepUS)
	case draft != nil:
		sm.Draft = draft
		why += ", draft " + draft.Name()
	}
	if s.DisableByBatchSize > 0 {
		why += fmt.Sprintf(", off at %d running", s.DisableByBatchSize)
	}
	if kvFromMemory && draft != nil {
		// Same bytes, now shared: the target's KV per token plus the
		// draft's, after the draft's weights.
		per := res.Roofline.KVBytesPerToken()
		free := float64(d.Engine.KVBlocks)*float64(d.Engine.BlockSize)*per - draftWeights
		tokens := int64(free / (per + draft.KVBytesPerToken()))
		blocks := tokens / int64(d.Engine.BlockSize)
		if blocks < 1 {
			return nil, "", errors.New(cfg.Where(key("method"), fmt.Sprintf("the draft's weights (%.2f GiB per GPU) leave no room for KV blocks next to %s on %s tp%d",
				draftWeights/(1<<30), d.Model, d.GPU, d.TP)))
		}
		why += fmt.Sprintf("; KV: %d blocks after the draft's %.2f GiB of weights and its KV", blocks, draftWeights/(1<<30))
		d.Engine.KVBlocks = blocks
	}
	return sm, why, nil
}

// eagleHead is an EAGLE draft head for the target: one decoder layer of the
// target's width (EAGLE, EAGLE-3: a single LlamaDecoderLayer over the
// target's features) reading the target's embedding and LM head, on the
// target's GPU and TP. A MoE target's head is dense, of the expert width
// times the experts per token (the published heads for MoE models are).
func eagleHead(t *roofline.Roofline) (*roofline.Roofline, error) {
	a := *t.A
	a.Name = "eagle-head(" + t.A.Name + ")"
	a.Layers = 1
	if a.MoE() {
		if a.Intermediate == 0 {
			a.Intermediate = a.ExpertIntermediate * a.ExpertsPerTok
		}
		a.Experts, a.ExpertsPerTok, a.ExpertIntermediate, a.SharedIntermediate, a.MoELayers = 0, 0, 0, 0, 0
	}
	return roofline.New(&a, t.G, t.TP)
}
