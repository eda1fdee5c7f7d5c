package report

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/blis-sim/blis/lib/trace"
)

// ThrashPct is the share of reloaded tokens whose blocks ping-ponged
// between the GPU and a lower tier (kv_thrash_tokens) above which the
// report flags cache thrashing.
const ThrashPct = 10.0

// BackpressurePct is the share of KV transfers that waited (for the decode
// replica's blocks or the prefill replica's link) above which the report
// flags pd_backpressure.
const BackpressurePct = 5.0

// kvStats accumulates the tiered-KV and P/D columns of one run (absent
// columns leave it empty and its tables out).
type kvStats struct {
	gpu, cpu, storage, thrash, in int64 // tokens, over scheduled llm requests
	// A run's lower tiers beyond cpu and storage (cached_tokens_<name>
	// columns), in column order: their names and tokens.
	extraNames               []string
	extra                    []int64
	reloads                  int64 // requests that reloaded from a lower tier
	reload                   *Dist
	xfers, waited, xferBytes int64
	xfer, wait               *Dist
}

type kvReader struct {
	gpu, cpu, storage, thrash, reload, xfer, wait, bytes icol
	pre, dec                                             *strKey
	on                                                   bool
	extraNames                                           []string
	extra                                                []icol
}

func (k *kvReader) bind(rec arrow.RecordBatch, idx func(string) int) {
	k.on = idx(trace.ColCachedTokensCPU) >= 0 || idx(trace.ColKVTransferBytes) >= 0
	if !k.on {
		return
	}
	for _, b := range []struct {
		c    *icol
		name string
	}{{&k.gpu, trace.ColCachedTokensGPU}, {&k.cpu, trace.ColCachedTokensCPU}, {&k.storage, trace.ColCachedTokensStorage},
		{&k.thrash, trace.ColKVThrashTokens}, {&k.reload, trace.ColKVReloadUS}, {&k.xfer, trace.ColKVTransferUS},
		{&k.wait, trace.ColKVTransferWaitUS}, {&k.bytes, trace.ColKVTransferBytes}} {
		b.c.bind(rec, idx(b.name))
	}
	// Lower tiers beyond cpu and storage: a column each (docs/tables.md).
	k.extraNames, k.extra = k.extraNames[:0], k.extra[:0]
	for i, f := range rec.Schema().Fields() {
		name, ok := strings.CutPrefix(f.Name, "cached_tokens_")
		if !ok || slices.Contains([]string{"gpu", "cpu", "storage"}, name) {
			continue
		}
		k.extraNames = append(k.extraNames, name)
		k.extra = append(k.extra, icol{})
		k.extra[len(k.extra)-1].bind(rec, i)
	}
	if k.pre == nil {
		k.pre, k.dec = newStrKey(), newStrKey()
	}
	k.pre.bind(rec, idx(trace.ColPrefillReplica))
	k.dec.bind(rec, idx(trace.ColDecodeReplica))
}

// add takes row i of a scheduled llm request.
func (s *kvStats) add(k *kvReader, i int, v *rowv, limit int, b *budget) {
	if !k.on {
		return
	}
	if v.ran {
		s.in += v.in
		s.gpu += k.gpu.or(i, 0)
		cpu, st := k.cpu.or(i, 0), k.storage.or(i, 0)
		s.cpu += cpu
		s.storage += st
		for e, name := range k.extraNames {
			j := slices.Index(s.extraNames, name)
			if j < 0 {
				s.extraNames, s.extra = append(s.extraNames, name), append(s.extra, 0)
				j = len(s.extra) - 1
			}
			s.extra[j] += k.extra[e].or(i, 0)
		}
		s.thrash += k.thrash.or(i, 0)
		if r := k.reload.or(i, 0); r > 0 {
			if s.reload == nil {
				s.reload = newDistBudget(limit, b)
			}
			s.reloads++
			s.reload.Add(r)
		}
	}
	if x, ok := k.xfer.get(i); ok {
		if s.xfer == nil {
			s.xfer, s.wait = newDistBudget(limit, b), newDistBudget(limit, b)
		}
		s.xfers++
		s.xfer.Add(x)
		w := k.wait.or(i, 0)
		s.wait.Add(w)
		if w > 0 {
			s.waited++
		}
		s.xferBytes += k.bytes.or(i, 0)
	}
}

// kvTables adds the tiered-KV and P/D tables when some run has them.
func (rep *Report) kvTables() {
	tiers := &Table{Name: "kv_tiers", Title: "KV tiers",
		Note: "scheduled llm requests; hit rates = cached tokens from each tier / input tokens; reload_tok_per_s = tokens reloaded from cpu+storage per second of span; " +
			"thrash_pct = kv_thrash_tokens / reloaded tokens (blocks reloaded, evicted and reloaded within 1 s); thrashing = thrash_pct > 10; " +
			"offload/reload_blk_per_s from the steps table (--steps, first run): blocks copied to and loaded from lower tiers per second of span",
		Columns: rep.runCol("group", "gpu_hit_pct", "cpu_hit_pct", "storage_hit_pct", "reloads", "reload_tok_per_s", "reload_mean_ms", "reload_p99_ms", "thrash_pct", "thrashing")}
	pd := &Table{Name: "pd", Title: "Prefill/decode KV transfers",
		Note: "transfer = prefill end to the last KV byte's arrival on the decode replica (granularity chunk/stream: the part not hidden behind the prefill); " +
			"wait = prefill end to the start of the last piece's sending (decode replica's blocks, prefill replica's link); " +
			"pd_backpressure = more than 5% of transfers waited",
		Columns: rep.runCol("group", "transfers", "gb_per_s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "waited_pct", "wait_p99_ms", "pd_backpressure")}
	// The lower tiers beyond cpu and storage that some run has.
	var extra []string
	for _, r := range rep.runs {
		for _, n := range r.kv.extraNames {
			if !slices.Contains(extra, n) {
				extra = append(extra, n)
			}
		}
	}
	if len(extra) > 0 {
		cols := append([]string{}, tiers.Columns[:4]...)
		for _, n := range extra {
			cols = append(cols, n+"_hit_pct")
		}
		tiers.Columns = append(cols, tiers.Columns[4:]...)
		tiers.Note = strings.Replace(tiers.Note, "from cpu+storage", "from every lower tier", 1)
	}
	var off, rel int64
	if rep.steps != nil {
		tiers.Columns = append(tiers.Columns, "offload_blk_per_s", "reload_blk_per_s")
		for _, in := range rep.steps.inst {
			off += in.offloads
			rel += in.reloads
		}
	}
	for i, r := range rep.runs {
		s := &r.kv
		sp := r.span() / 1e6
		lowTok := s.cpu + s.storage
		for _, x := range s.extra {
			lowTok += x
		}
		if lowTok > 0 || s.reloads > 0 {
			low := float64(lowTok)
			c := rep.runCell(i, txt("all"), pct(float64(s.gpu), float64(s.in)), pct(float64(s.cpu), float64(s.in)), pct(float64(s.storage), float64(s.in)))
			for _, n := range extra {
				var v int64
				if j := slices.Index(s.extraNames, n); j >= 0 {
					v = s.extra[j]
				}
				c = append(c, pct(float64(v), float64(s.in)))
			}
			c = append(c, integer(s.reloads), num(low/sp, 1))
			if s.reload != nil {
				c = append(c, ms(s.reload.Mean()), ms(s.reload.Quantile(0.99)))
			} else {
				c = append(c, txt(""), txt(""))
			}
			tp := 100 * float64(s.thrash) / max(low, 1)
			flag := "no"
			if tp > ThrashPct {
				flag = "yes"
			}
			c = append(c, num(tp, 1), txt(flag))
			if rep.steps != nil {
				if i == 0 {
					c = append(c, num(float64(off)/sp, 1), num(float64(rel)/sp, 1))
				} else {
					c = append(c, txt(""), txt(""))
				}
			}
			tiers.add(c...)
		}
		if s.xfers > 0 {
			wp := 100 * float64(s.waited) / float64(s.xfers)
			flag := "no"
			if wp > BackpressurePct {
				flag = "yes"
			}
			d := s.xfer
			pd.add(rep.runCell(i, txt("all"), integer(s.xfers), num(float64(s.xferBytes)/1e9/sp, 3), ms(d.Mean()), ms(d.Quantile(0.5)), ms(d.Quantile(0.9)),
				ms(d.Quantile(0.99)), ms(d.Max()), num(wp, 1), ms(s.wait.Quantile(0.99)), txt(flag))...)
		}
	}
	if len(tiers.Rows) > 0 {
		rep.Tables = append(rep.Tables, tiers)
	}
	if len(pd.Rows) > 0 {
		rep.Tables = append(rep.Tables, pd)
		rep.poolTable()
	}
}

// poolTable shows prefill vs decode pool utilisation from the steps table
// (its role column), for the first run.
func (rep *Report) poolTable() {
	st := rep.steps
	if st == nil || len(st.role) == 0 {
		return
	}
	t := &Table{Name: "pools", Title: "Pool utilisation",
		Note:    "from the steps table: busy_pct = time in steps / (replicas × span of the first run)",
		Columns: []string{"role", "replicas", "steps", "busy_pct", "prefill_tokens", "decode_tokens"}}
	span := rep.runs[0].span()
	for _, role := range []string{"prefill", "decode", "monolithic"} {
		var n, steps, busy, pre, dec int64
		for id, in := range st.inst {
			if st.role[id] != role {
				continue
			}
			n++
			steps += in.steps
			busy += in.busy
			pre += in.prefill
			dec += in.decode
		}
		if n == 0 {
			continue
		}
		t.add(txt(role), integer(n), integer(steps), pct(float64(busy), float64(n)*span), integer(pre), integer(dec))
	}
	if len(t.Rows) > 0 {
		rep.Tables = append(rep.Tables, t)
	}
}
