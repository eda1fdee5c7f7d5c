package cluster

import (
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// specConfig is the scheduler's view of a deployment's speculative
// decoding (nil when off): k, the expected tokens per step of the default
// rate and of each slo_class with its own.
func specConfig(s *config.Speculative) *sched.Spec {
	if s == nil {
		return nil
	}
	q := func(alpha float64) int64 {
		return int64(latency.ExpectedTokens(alpha, s.NumSpeculativeTokens)*sched.SpecQ + 0.5)
	}
	c := &sched.Spec{K: int32(s.NumSpeculativeTokens), DisableBatch: s.DisableByBatchSize, Tokens: []int64{q(s.AcceptanceRate)}}
	for i, name := range s.Classes() {
		if c.Class == nil {
			c.Class = map[string]uint8{}
		}
		c.Class[name] = uint8(i + 1)
		c.Tokens = append(c.Tokens, q(s.AcceptanceByClass[name]))
	}
	return c
}
