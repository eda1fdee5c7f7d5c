package measure

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ServingPoint is one closed-loop measurement: Concurrency requests in
// flight, each with InputTokens prompt tokens and OutputTokens generated,
// and the measured mean TTFT and mean TPOT.
type ServingPoint struct {
	Source       string // file:line, for reports
	ID           string
	Model        string // HF repo id as written in the file
	GPU          string
	Engine       string
	Version      string
	Precision    string // "" means the checkpoint's own dtype
	TP           int
	InputTokens  int
	OutputTokens int
	Concurrency  int
	TTFTus       float64
	TPOTus       float64
}

// Group is the deployment a serving point belongs to; a coefficients file
// describes exactly one group.
func (p *ServingPoint) Group() string {
	prec := p.Precision
	if prec == "" {
		prec = "native"
	}
	ver := p.Version
	if ver == "" {
		ver = "unknown"
	}
	return fmt.Sprintf("%s %s tp%d %s-%s %s", p.Model, p.GPU, p.TP, p.Engine, ver, prec)
}

// ServingFilter selects rows; empty fields and TP 0 match anything.
type ServingFilter struct {
	Model, GPU, Engine, Version, Precision string
	TP                                     int
}

// MatchModel accepts the HF repo id or its last component, case-insensitively.
func MatchModel(want, have string) bool {
	if want == "" {
		return true
	}
	w, h := strings.ToLower(want), strings.ToLower(have)
	if w == h {
		return true
	}
	if i := strings.LastIndexByte(h, '/'); i >= 0 && h[i+1:] == w {
		return true
	}
	return false
}

// MatchGPU accepts "h100_sxm", "h100-sxm", "H100" for the system h100_sxm.
func MatchGPU(want, have string) bool {
	if want == "" {
		return true
	}
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	w, h := norm(want), norm(have)
	return w == h || strings.TrimSuffix(h, "_sxm") == w || strings.TrimSuffix(h, "_80gb") == w
}

// ServingStats counts what the reader skipped, so nothing is dropped silently.
type ServingStats struct {
	Rows        int // data rows read
	Filtered    int // not matching the filter
	NotAgg      int // matching but disaggregated or otherwise not a single aggregated instance
	MissingTP   int // matching but without tp_size
	Duplicates  int // matching but an exact repeat of a kept row: one measurement published twice
	Kept        int
	GroupCounts map[string]int
}

// aiconfigurator's silicon_sample.csv columns used here.
var servingCols = []string{"model_path", "system", "backend", "backend_version", "precision", "mode",
	"isl", "osl", "batch_size", "tp_size", "silicon_ttft_ms", "silicon_tpot_ms"}

// ReadServingPoints reads aiconfigurator's silicon_sample.csv as it is and
// keeps the aggregated rows matching f. Times are converted from ms to µs.
func ReadServingPoints(path string, r io.Reader, f ServingFilter) ([]ServingPoint, ServingStats, error) {
	st := ServingStats{GroupCounts: map[string]int{}}
	t, err := newCSVTable(path, r, servingCols...)
	if err != nil {
		return nil, st, err
	}
	var out []ServingPoint
	// silicon_sample.csv publishes some measurements twice (the same values
	// under two source files); counting one twice would weigh it double in a
	// fit and could put its twin in the held-out set.
	type rowKey struct {
		group          string
		isl, osl, conc int
		ttft, tpot     float64
	}
	seen := map[rowKey]bool{}
	for {
		if err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, st, err
		}
		st.Rows++
		p := ServingPoint{Model: t.str("model_path"), GPU: t.str("system"), Engine: t.str("backend"),
			Version: t.str("backend_version"), Precision: t.str("precision"), ID: t.str("id"),
			Source: fmt.Sprintf("%s:%d", path, t.line)}
		if !MatchModel(f.Model, p.Model) || !MatchGPU(f.GPU, p.GPU) ||
			(f.Engine != "" && !strings.EqualFold(f.Engine, p.Engine)) ||
			(f.Version != "" && f.Version != p.Version) ||
			(f.Precision != "" && !strings.EqualFold(f.Precision, precisionName(p.Precision))) {
			st.Filtered++
			continue
		}
		if mode := t.str("mode"); mode != "agg" {
			st.NotAgg++
			continue
		}
		if t.str("tp_size") == "" {
			st.MissingTP++
			continue
		}
		if p.TP, err = t.count("tp_size", true); err != nil {
			return nil, st, err
		}
		if f.TP != 0 && p.TP != f.TP {
			st.Filtered++
			continue
		}
		if p.InputTokens, err = t.count("isl", true); err != nil {
			return nil, st, err
		}
		if p.OutputTokens, err = t.count("osl", true); err != nil {
			return nil, st, err
		}
		if p.Concurrency, err = t.count("batch_size", true); err != nil {
			return nil, st, err
		}
		ttft, err := t.float("silicon_ttft_ms", true)
		if err != nil {
			return nil, st, err
		}
		tpot, err := t.float("silicon_tpot_ms", true)
		if err != nil {
			return nil, st, err
		}
		// Both columns are in ms. Real decodes take 2–600 ms per token
		// (silicon_sample.csv: 1.87–560); a TPOT outside 0.1 ms–10 s, or a
		// TTFT over an hour, means µs or s were written into a column.
		if tpot < 0.1 || tpot > 10_000 || ttft > 3_600_000 {
			return nil, st, t.errf("silicon_tpot_ms", "expected milliseconds (TPOT 0.1 ms to 10 s), found ttft %g and tpot %g (inconsistent units?)", ttft, tpot)
		}
		p.TTFTus, p.TPOTus = ttft*1000, tpot*1000
		g := p.Group()
		k := rowKey{g, p.InputTokens, p.OutputTokens, p.Concurrency, ttft, tpot}
		if seen[k] {
			st.Duplicates++
			continue
		}
		seen[k] = true
		st.Kept++
		st.GroupCounts[g]++
		out = append(out, p)
	}
	return out, st, nil
}

func precisionName(p string) string {
	if p == "" {
		return "native"
	}
	return p
}

// Groups lists the distinct deployments, most rows first, then by name.
func (s ServingStats) Groups() []string {
	g := make([]string, 0, len(s.GroupCounts))
	for k := range s.GroupCounts {
		g = append(g, k)
	}
	sort.Slice(g, func(i, j int) bool {
		if s.GroupCounts[g[i]] != s.GroupCounts[g[j]] {
			return s.GroupCounts[g[i]] > s.GroupCounts[g[j]]
		}
		return g[i] < g[j]
	})
	return g
}

// SingleGroup checks that the points describe one deployment, since one
// coefficients file describes one; otherwise it says which flags narrow it.
func SingleGroup(path string, pts []ServingPoint, st ServingStats) error {
	if len(pts) == 0 {
		return &InputError{Path: path, Msg: fmt.Sprintf("no serving points match the filter (%d rows read, %d filtered out, %d not aggregated, %d without tp_size)",
			st.Rows, st.Filtered, st.NotAgg, st.MissingTP)}
	}
	groups := st.Groups()
	if len(groups) == 1 {
		return nil
	}
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "\n  %4d rows  %s", st.GroupCounts[g], g)
	}
	return &InputError{Path: path, Msg: "the matching rows span several deployments; narrow them with --model/--gpu/--tp/--engine/--engine-version/--precision:" + b.String()}
}
