package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blis-sim/blis/lib/trace"
)

// Trace-to-spec fitting: FitSpec reads a converted real trace (a requests
// table) and proposes a spec whose tenants keep the trace's rates, burstiness
// (gap CV), length distributions, prefix reuse and session structure, so a
// planner can scale the workload (aggregate_rate × 3) with its shape intact.

// TraceStats are the statistics a fitted spec is judged by.
type TraceStats struct {
	Requests, Roots, Sessions int64
	SpanS                     float64 // first to last root arrival, seconds
	Rate                      float64 // roots per second
	GapCV                     float64 // CV of root inter-arrival gaps
	In, Out                   LengthStats
	PrefixShare               float64 // rows whose first prefix block was seen before
	TurnsMean                 float64 // rows per session (sessions only)
}

// LengthStats summarises a token-length column.
type LengthStats struct{ Mean, P50, P90, P99, Max float64 }

func lengthStats(xs []float64) LengthStats {
	if len(xs) == 0 {
		return LengthStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, s, nil) }
	return LengthStats{Mean: stat.Mean(s, nil), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: s[len(s)-1]}
}

// ComputeTraceStats computes TraceStats of a requests table (llm rows).
func ComputeTraceStats(rows []trace.Request) TraceStats {
	var st TraceStats
	var roots []int64
	var in, out []float64
	seenFirst := map[uint64]bool{}
	var shared, hashed int64
	sess := map[string]int64{}
	for i := range rows {
		r := &rows[i]
		if r.Kind == trace.KindTool || r.SourceStatus == trace.SourceFailed {
			continue
		}
		st.Requests++
		if r.ArrivalUS != trace.Null && len(r.DependsOn) == 0 {
			roots = append(roots, r.ArrivalUS)
		}
		in = append(in, float64(r.InputTokens))
		out = append(out, float64(r.OutputTokens))
		if len(r.PrefixHashes) > 0 {
			hashed++
			if seenFirst[r.PrefixHashes[0]] {
				shared++
			}
			seenFirst[r.PrefixHashes[0]] = true
		}
		if r.SessionID != "" {
			sess[r.SessionID]++
		}
	}
	st.Roots = int64(len(roots))
	slices.Sort(roots)
	if len(roots) > 1 {
		st.SpanS = float64(roots[len(roots)-1]-roots[0]) / 1e6
		gaps := make([]float64, len(roots)-1)
		for i := range gaps {
			gaps[i] = float64(roots[i+1]-roots[i]) / 1e6
		}
		m, sd := stat.MeanStdDev(gaps, nil)
		if m > 0 {
			st.GapCV = sd / m
			st.Rate = 1 / m
		}
	}
	st.In, st.Out = lengthStats(in), lengthStats(out)
	if hashed > 0 {
		st.PrefixShare = float64(shared) / float64(hashed)
	}
	st.Sessions = int64(len(sess))
	if len(sess) > 0 {
		var n int64
		for _, v := range sess {
			n += v
		}
		st.TurnsMean = float64(n) / float64(len(sess))
	}
	return st
}

// FitLengths fits a token-length distribution to xs: a lognormal by maximum
// likelihood (gonum's Normal.Fit on the logs), kept when its Kolmogorov–
// Smirnov distance to the sample is at most 0.05; otherwise a 20-bin
// histogram on the sample's quantiles (empirical edges/counts), which keeps
// any shape. Both are clamped to the sample's range.
func FitLengths(xs []float64) (yaml string, ks float64) {
	if len(xs) == 0 {
		return "1", 0
	}
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		s = append(s, math.Max(x, 1))
	}
	slices.Sort(s)
	lo, hi := s[0], s[len(s)-1]
	if lo == hi {
		return fmtFloat(lo), 0
	}
	logs := make([]float64, len(s))
	for i, x := range s {
		logs[i] = math.Log(x)
	}
	var n distuv.Normal
	n.Fit(logs, nil)
	ln := distuv.LogNormal{Mu: n.Mu, Sigma: n.Sigma}
	for i, x := range s {
		f := ln.CDF(x)
		ks = math.Max(ks, math.Max(math.Abs(float64(i+1)/float64(len(s))-f), math.Abs(f-float64(i)/float64(len(s)))))
	}
	if ks <= 0.05 {
		return fmt.Sprintf("{dist: lognormal, mu: %.4f, sigma: %.4f, min: %s, max: %s}", n.Mu, n.Sigma, fmtFloat(lo), fmtFloat(hi)), ks
	}
	// Otherwise the sample itself: its distinct values with their counts
	// when there are few, else 200 quantiles (at (k+½)/200) drawn uniformly,
	// which follows the quantile function and keeps any shape.
	vals, weights := []float64{}, []float64{}
	for _, x := range s {
		if len(vals) > 0 && vals[len(vals)-1] == x {
			weights[len(weights)-1]++
			continue
		}
		vals, weights = append(vals, x), append(weights, 1)
	}
	if len(vals) <= 100 {
		return fmt.Sprintf("{dist: empirical, values: %s, weights: %s}", floats(vals), floats(weights)), ks
	}
	const points = 200
	q := make([]float64, points)
	for k := range q {
		q[k] = math.Round(stat.Quantile((float64(k)+0.5)/points, stat.Empirical, s, nil))
	}
	return fmt.Sprintf("{dist: empirical, values: %s}", floats(q)), ks
}

func floats(v []float64) string {
	p := make([]string, len(v))
	for i, x := range v {
		p[i] = fmtFloat(x)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// tenantRows groups rows by tenant_id in first-appearance order ("" = none).
func tenantRows(rows []trace.Request) ([]string, map[string][]int) {
	var names []string
	idx := map[string][]int{}
	for i := range rows {
		t := rows[i].TenantID
		if _, ok := idx[t]; !ok {
			names = append(names, t)
		}
		idx[t] = append(idx[t], i)
	}
	return names, idx
}

// clientName makes a tenant id a client name: letters, digits, '_' and
// '.' only (no '-', so no name is another's followed by '-'), unique.
func clientName(t string, used map[string]bool) string {
	n := strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, t)
	if n == "" {
		n = "trace"
	}
	base := n
	for k := 2; used[n]; k++ {
		n = fmt.Sprintf("%s_%d", base, k)
	}
	used[n] = true
	return n
}

// FitSpec proposes a spec for rows (a converted trace); source names it in
// the spec's description. The YAML carries comments with the statistics
// each fitted value came from.
func FitSpec(rows []trace.Request, source string) (string, error) {
	all := ComputeTraceStats(rows)
	if all.Roots < 2 || all.SpanS <= 0 {
		return "", fmt.Errorf("%s: %d requests with an arrival time over %.3f s: fitting needs at least two root requests at different times", source, all.Roots, all.SpanS)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Fitted by blis-synth --fit from %s:\n", source)
	fmt.Fprintf(&b, "# %d requests, %d roots over %.1f s (%.3f roots/s, gap CV %.2f); input mean %.0f p50 %.0f p99 %.0f; output mean %.0f p50 %.0f p99 %.0f.\n",
		all.Requests, all.Roots, all.SpanS, all.Rate, all.GapCV, all.In.Mean, all.In.P50, all.In.P99, all.Out.Mean, all.Out.P50, all.Out.P99)
	fmt.Fprintf(&b, "# Scale the load with aggregate_rate (×3 keeps every tenant's share and shape).\n")
	fmt.Fprintf(&b, "version: 1\nseed: 1\ndescription: fitted from %s\n", yamlQuote(source))
	fmt.Fprintf(&b, "horizon: %.3fs\naggregate_rate: %.6g\n", all.SpanS, all.Rate)
	bs := 0
	// Prefix reuse: the most common first prefix block becomes a shared
	// system prompt whose length is the median leading run of blocks a row
	// shares with the previous row that had the same first block.
	// Only rows of different sessions count: a conversation's turns share
	// their accumulated context, not just the system prompt.
	type lastRow struct {
		h    []uint64
		sess string
	}
	last := map[uint64]lastRow{}
	var runs []float64
	for i := range rows {
		h, sid := rows[i].PrefixHashes, rows[i].SessionID
		if len(h) == 0 {
			continue
		}
		if p, ok := last[h[0]]; ok && (sid == "" || sid != p.sess) {
			k := 0
			for k < len(p.h) && k < len(h) && p.h[k] == h[k] {
				k++
			}
			runs = append(runs, float64(k))
		}
		if p, ok := last[h[0]]; !ok || sid == "" || sid != p.sess {
			last[h[0]] = lastRow{h, sid}
		}
	}
	names, idx := tenantRows(rows)
	prefixLen := 0
	if all.PrefixShare > 0.05 && len(runs) > 0 {
		bs = 16
		slices.Sort(runs)
		blocks := stat.Quantile(0.5, stat.Empirical, runs, nil)
		prefixLen = int(blocks) * bs
		if prefixLen > 0 {
			fmt.Fprintf(&b, "# %.0f%% of rows start with a prompt block seen before; the median shared run is %.0f blocks.\n", 100*all.PrefixShare, blocks)
			fmt.Fprintf(&b, "prefix_block_size: %d\nprefix_groups: [{name: shared, length: %d}]\n", bs, prefixLen)
		}
	}
	b.WriteString("clients:\n")
	used := map[string]bool{}
	for _, t := range names {
		tr := make([]trace.Request, 0, len(idx[t]))
		for _, i := range idx[t] {
			tr = append(tr, rows[i])
		}
		ts := ComputeTraceStats(tr)
		if ts.Roots == 0 {
			fmt.Fprintf(&b, "  # tenant %q has no root request with an arrival time: left out\n", t)
			continue
		}
		name := clientName(t, used)
		fmt.Fprintf(&b, "  - name: %s\n", yamlQuote(name))
		if t != "" {
			fmt.Fprintf(&b, "    tenant_id: %s\n", yamlQuote(t))
		}
		if len(names) > 1 {
			// Rounded down, so the fractions never sum above 1.
			fmt.Fprintf(&b, "    rate_fraction: %.6f  # %d of %d roots\n", math.Max(math.Floor(1e6*float64(ts.Roots)/float64(all.Roots)), 1)/1e6, ts.Roots, all.Roots)
		}
		b.WriteString(fitArrival(tr, all.SpanS))
		// Sessions: turns per session, think times, and the new tokens of
		// each turn when the context accumulates.
		sess := map[string][]int{}
		var sessOrder []string
		for i := range tr {
			if s := tr[i].SessionID; s != "" && tr[i].Kind != trace.KindTool {
				if _, ok := sess[s]; !ok {
					sessOrder = append(sessOrder, s)
				}
				sess[s] = append(sess[s], i)
			}
		}
		var in, out, turns, think []float64
		accumulate, turnsSeen := 0, 0
		for _, s := range sessOrder {
			m := sess[s]
			turns = append(turns, float64(len(m)))
			for j, i := range m {
				if j == 0 {
					continue
				}
				p := &tr[m[j-1]]
				turnsSeen++
				if tr[i].InputTokens >= p.InputTokens+p.OutputTokens {
					accumulate++
				}
				think = append(think, float64(tr[i].DelayUS)/1e6)
			}
		}
		acc := turnsSeen > 0 && accumulate*10 >= turnsSeen*8
		for i := range tr {
			r := &tr[i]
			if r.Kind == trace.KindTool || r.SourceStatus == trace.SourceFailed {
				continue
			}
			n := float64(r.InputTokens)
			if prefixLen > 0 && len(r.PrefixHashes) > 0 && n > float64(prefixLen) {
				n -= float64(prefixLen)
			}
			out = append(out, float64(r.OutputTokens))
			in = append(in, n)
		}
		if acc {
			// New message = this prompt − the previous turn's prompt and answer.
			in = in[:0]
			for _, s := range sessOrder {
				m := sess[s]
				for j, i := range m {
					n := float64(tr[i].InputTokens)
					if j > 0 {
						p := &tr[m[j-1]]
						n -= float64(p.InputTokens + p.OutputTokens)
					} else if prefixLen > 0 && len(tr[i].PrefixHashes) > 0 && n > float64(prefixLen) {
						n -= float64(prefixLen)
					}
					in = append(in, math.Max(n, 1))
				}
			}
		}
		inY, inKS := FitLengths(in)
		outY, outKS := FitLengths(out)
		fmt.Fprintf(&b, "    input: %s  # KS %.3f\n", inY, inKS)
		fmt.Fprintf(&b, "    output: %s  # KS %.3f\n", outY, outKS)
		if prefixLen > 0 && ts.PrefixShare > 0 {
			fmt.Fprintf(&b, "    prefix: {reuse_probability: %.3f}\n", ts.PrefixShare)
		}
		if len(sessOrder) > 0 && slices.Max(turns) > 1 {
			ty, _ := FitLengths(turns)
			fmt.Fprintf(&b, "    conversation:\n      turns: %s\n", ty)
			if len(think) > 0 {
				for i := range think {
					think[i] = math.Max(think[i], 0.001)
				}
				thy, _ := FitLengths(think)
				fmt.Fprintf(&b, "      think_time: %s\n", thy)
			}
			if acc {
				b.WriteString("      context_growth: accumulate\n")
			}
		}
	}
	return b.String(), nil
}

// fitArrival fits a tenant's root arrivals: a step load profile with one
// level per window (up to 48 windows of about 100 roots or more) carries the
// trace's rate changes over time, and the gap CV within windows (each gap
// scaled by its window's rate) picks the process: poisson for a CV near 1,
// else gamma with that CV.
func fitArrival(tr []trace.Request, span float64) string {
	var roots []int64
	for i := range tr {
		if tr[i].ArrivalUS != trace.Null && len(tr[i].DependsOn) == 0 && tr[i].Kind != trace.KindTool {
			roots = append(roots, tr[i].ArrivalUS)
		}
	}
	slices.Sort(roots)
	spanUS := int64(span * 1e6)
	w := min(max(len(roots)/100, 1), 48)
	wlen := spanUS/int64(w) + 1
	counts := make([]float64, w)
	for _, t := range roots {
		counts[min(int(t/wlen), w-1)]++
	}
	mean := float64(len(roots)) / float64(w)
	var gaps []float64
	for i := 1; i < len(roots); i++ {
		a, c := int(roots[i-1]/wlen), int(roots[i]/wlen)
		if a != c || a >= w {
			continue
		}
		rate := counts[a] / (float64(wlen) / 1e6)
		gaps = append(gaps, float64(roots[i]-roots[i-1])/1e6*rate)
	}
	var b strings.Builder
	cv := 1.0
	if len(gaps) > 1 {
		m, sd := stat.MeanStdDev(gaps, nil)
		if m > 0 {
			cv = sd / m
		}
	}
	if cv > 0.85 && cv < 1.15 || len(gaps) < 2 {
		fmt.Fprintf(&b, "    arrival: {process: poisson}  # gap CV within windows %.2f\n", cv)
	} else {
		fmt.Fprintf(&b, "    arrival: {process: gamma, cv: %.3f}  # gap CV within windows\n", math.Min(math.Max(cv, 0.05), 20))
	}
	if w > 1 {
		fmt.Fprintf(&b, "    load_profile:  # roots per window of %.1f s / the mean\n      type: step\n      steps:\n", float64(wlen)/1e6)
		for k, c := range counts {
			fmt.Fprintf(&b, "        - {at: %.3fs, multiplier: %.4f}\n", float64(int64(k)*wlen)/1e6, c/mean)
		}
	}
	return b.String()
}

func yamlQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 && !strings.ContainsAny(s[:1], "-.0123456789") {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// FitComparison regenerates the fitted spec and puts its statistics beside
// the trace's, as a Markdown table.
func FitComparison(rows []trace.Request, spec *Spec) (string, TraceStats, TraceStats, error) {
	want := ComputeTraceStats(rows)
	var gen []trace.Request
	_, err := Generate(spec, func(r *trace.Request) error {
		c := *r
		c.PrefixHashes = slices.Clone(r.PrefixHashes)
		c.DependsOn = nil
		if len(r.DependsOn) > 0 {
			c.DependsOn = []string{""}
		}
		gen = append(gen, c)
		return nil
	})
	if err != nil {
		return "", want, TraceStats{}, err
	}
	got := ComputeTraceStats(gen)
	var b strings.Builder
	b.WriteString("| statistic | trace | fitted spec |\n|---|---:|---:|\n")
	row := func(name string, a, c float64, prec int) {
		fmt.Fprintf(&b, "| %s | %.*f | %.*f |\n", name, prec, a, prec, c)
	}
	row("requests", float64(want.Requests), float64(got.Requests), 0)
	row("roots/s", want.Rate, got.Rate, 3)
	row("gap CV", want.GapCV, got.GapCV, 2)
	for _, l := range []struct {
		name string
		a, c LengthStats
	}{{"input", want.In, got.In}, {"output", want.Out, got.Out}} {
		row(l.name+" mean", l.a.Mean, l.c.Mean, 0)
		row(l.name+" p50", l.a.P50, l.c.P50, 0)
		row(l.name+" p90", l.a.P90, l.c.P90, 0)
		row(l.name+" p99", l.a.P99, l.c.P99, 0)
	}
	if want.PrefixShare > 0 || got.PrefixShare > 0 {
		row("prefix share", want.PrefixShare, got.PrefixShare, 3)
	}
	if want.Sessions > 0 || got.Sessions > 0 {
		row("rows per session", want.TurnsMean, got.TurnsMean, 2)
	}
	return b.String(), want, got, nil
}
