package cluster

import (
	"math"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
)

// loraConfig is the scheduler's view of a deployment's adapters (nil:
// none); their bytes and FLOPs were filled by the engine's Prepare.
func loraConfig(l *config.LoRA) *sched.LoRA {
	if l == nil {
		return nil
	}
	c := &sched.LoRA{MaxLoras: l.MaxLoras, MaxCPU: l.MaxCPULoras, Index: make(map[string]uint16, len(l.Adapters))}
	us := func(bytes int64, gbps float64) int64 {
		if gbps <= 0 {
			return 0
		}
		return int64(math.Ceil(float64(bytes) / (gbps * 1e3)))
	}
	for i, a := range l.Adapters {
		c.Index[a.Name] = uint16(i + 1)
		c.Names = append(c.Names, a.Name)
		c.Bytes = append(c.Bytes, a.Bytes)
		c.FLOPs = append(c.FLOPs, a.FLOPs)
		c.LoadUS = append(c.LoadUS, us(a.Bytes, l.HostGBps))
		c.FetchUS = append(c.FetchUS, us(a.Bytes, l.StorageGBps))
	}
	return c
}

// loraKnown checks that every deployment r may be routed to has r's adapter
// in its registry; a name none lists is an input error naming the row.
func (c *Cluster) loraKnown(g *group, r *request.State) bool {
	for _, d := range g.deps {
		if d.lora == nil || d.lora.Index[r.Req.LoRA] == 0 {
			c.fail(c.rowErr(&r.Req, r.Row, "column %s: adapter %q is not in the lora registry of deployment %s", row.ColLoRA, r.Req.LoRA, d.ID))
			return false
		}
	}
	return true
}

// reportLoRAs puts replica i's resident adapters on board b at position j.
func (c *Cluster) reportLoRAs(b *policy.Board, j int, i int32) {
	s, ok := c.reps[i].Sched.(interface {
		ResidentLoRAs([]string) []string
		LoRASlots() (int, int)
	})
	if !ok {
		return
	}
	c.loraBuf = s.ResidentLoRAs(c.loraBuf[:0])
	active, slots := s.LoRASlots()
	b.SetLoRAs(j, c.loraBuf, slots-active)
}
