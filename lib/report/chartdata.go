package report

// What the HTML pictures need beyond the tables, collected only when a page
// is asked for (Options.Charts): a report without --html reads and keeps
// exactly what it did before. Everything here is bounded whatever the
// input's size: per-request samples are thinned by a hash of the request id
// (so two runs of the same requests keep the same ids), and time series
// merge bins as time goes on.

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/trace"
)

// maxSamples bounds the requests kept per run for the per-request plots.
const maxSamples = 2000

// sample is one completed llm request kept for the per-request plots.
type sample struct {
	h                     uint64 // FNV-1a of request_id
	arr, in               int64
	ttft, e2e, recT, recE int64 // trace.Null when absent
}

// sampler keeps the requests whose id hash has its low `level` bits zero,
// raising the level (halving what it keeps) when it holds too many: a
// deterministic, uniform thinning that two runs of the same requests agree on.
type sampler struct {
	level uint
	s     []sample
	seen  int64
}

func (sp *sampler) add(x sample) {
	sp.seen++
	if x.h&(1<<sp.level-1) != 0 {
		return
	}
	sp.s = append(sp.s, x)
	for len(sp.s) > 2*maxSamples {
		sp.level++
		m := uint64(1)<<sp.level - 1
		sp.s = slices.DeleteFunc(sp.s, func(y sample) bool { return y.h&m != 0 })
	}
}

// at returns the samples thinned to level l (≥ sp.level), by hash.
func (sp *sampler) at(l uint) []sample {
	m := uint64(1)<<l - 1
	var out []sample
	for _, x := range sp.s {
		if x.h&m == 0 {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b sample) int { return cmp.Compare(a.h, b.h) })
	return out
}

func idHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// runCharts is one run's chart data.
type runCharts struct {
	samples  sampler
	inflight *series // +1 at arrival, -1 at finish: requests in the system
	// Prompt tokens by the tier that served them, binned by first scheduling.
	tierIn, tierGPU, tierCPU, tierSto *series
	tiers                             bool
	xfer                              bool // P/D columns present
}

func newRunCharts() *runCharts {
	return &runCharts{inflight: newSeries(), tierIn: newSeries(), tierGPU: newSeries(), tierCPU: newSeries(), tierSto: newSeries()}
}

// row takes one llm row.
func (c *runCharts) row(rd *reader, i int, v *rowv, fin int64, hasFin bool) {
	if v.hasEff && hasFin && fin >= v.eff {
		c.inflight.add(v.eff, 1)
		c.inflight.add(fin, -1)
	}
	if rd.kv.on && v.ran {
		t := v.eff
		if v.hasSched {
			t = v.sched
		}
		if v.hasSched || v.hasEff {
			c.tiers = true
			c.tierIn.add(t, float64(v.in))
			c.tierGPU.add(t, float64(rd.kv.gpu.or(i, 0)))
			c.tierCPU.add(t, float64(rd.kv.cpu.or(i, 0)))
			c.tierSto.add(t, float64(rd.kv.storage.or(i, 0)))
		}
	}
	if v.st != stCompleted || !v.hasEff || rd.reqID == nil {
		return
	}
	x := sample{h: idHash(trace.StringAt(rd.reqID, i)), arr: v.eff, in: v.in, ttft: trace.Null, e2e: trace.Null, recT: trace.Null, recE: trace.Null}
	if v.hasTTFT {
		x.ttft = v.ttft
	}
	if v.hasE2E {
		x.e2e = v.e2e
	}
	if t, ok := rd.recT.get(i); ok {
		x.recT = t
	}
	if e, ok := rd.recE.get(i); ok {
		x.recE = e
	}
	c.samples.add(x)
}

// inflightAt returns the requests in the system at time t (µs): the running
// sum of arrivals minus finishes up to t's bin.
func (c *runCharts) inflightAt() func(t int64) float64 {
	cum := make([]float64, len(c.inflight.sum))
	s := 0.0
	for i, v := range c.inflight.sum {
		s += v
		cum[i] = s
	}
	w := c.inflight.width
	return func(t int64) float64 {
		if len(cum) == 0 || t < 0 {
			return math.NaN()
		}
		return cum[min(int(t/w), len(cum)-1)]
	}
}
