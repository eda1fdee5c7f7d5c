package sweep

import (
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/report"
)

// Metric is one summary column taken from blis-report's tables.
type Metric struct {
	Name  string // summary column
	Unit  string // for docs and the table's field metadata
	table string // report table
	col   string // its column
	row   string // the latency table's metric (its rows), "" otherwise
	slo   bool   // only with report SLOs
	Doc   string
}

var latencyStats = []string{"mean", "p50", "p90", "p95", "p99", "max"}

// Metrics lists every summary metric in column order.
var Metrics = buildMetrics()

func buildMetrics() []Metric {
	var ms []Metric
	add := func(name, unit, table, col, doc string) {
		ms = append(ms, Metric{Name: name, Unit: unit, table: table, col: col, Doc: doc})
	}
	add("requests", "count", "requests", "total", "rows of the workload (llm and tool)")
	add("llm_requests", "count", "requests", "llm", "model requests")
	for _, st := range []string{"completed", "rejected", "dropped", "timed_out", "unfinished", "source_failed"} {
		add(st, "count", "requests", st, "rows with status "+st+" (llm and tool)")
	}
	add("span_s", "s", "throughput", "span_s", "first arrival to the run's last event")
	add("req_per_s", "1/s", "throughput", "req_per_s", "completed llm requests per second of span")
	add("input_tok_per_s", "tokens/s", "throughput", "input_tok_per_s", "input tokens of completed llm requests per second")
	add("output_tok_per_s", "tokens/s", "throughput", "output_tok_per_s", "generated tokens of completed llm requests per second")
	for _, m := range []string{"ttft", "tpot", "e2e", "queue_enqueued", "queue_arrival"} {
		for _, st := range latencyStats {
			ms = append(ms, Metric{Name: m + "_" + st + "_ms", Unit: "ms", table: "latency", col: st, row: m,
				Doc: st + " of " + m + " over completed llm requests"})
		}
	}
	add("cache_hit_pct", "%", "cache", "hit_rate_pct", "prompt tokens served from the prefix cache")
	add("preemptions", "count", "cache", "preemptions", "recompute preemptions")
	add("preempted_pct", "%", "cache", "preempted_pct", "llm requests preempted at least once")
	for _, c := range []struct{ name, col, unit, doc string }{
		{"slo_ttft_met_pct", "ttft_met_pct", "%", "requests meeting the ttft target"},
		{"slo_tpot_met_pct", "tpot_met_pct", "%", "requests meeting the tpot target"},
		{"slo_e2e_met_pct", "e2e_met_pct", "%", "requests meeting the e2e target"},
		{"slo_all_met_pct", "all_met_pct", "%", "requests meeting every target of their SLO (attainment)"},
		{"goodput_req_per_s", "goodput_req_per_s", "1/s", "requests meeting every target per second of span"},
	} {
		ms = append(ms, Metric{Name: c.name, Unit: c.unit, table: "slo", col: c.col, slo: true, Doc: c.doc})
	}
	return ms
}

// extra columns computed by the sweep rather than read from the report.
const (
	colGPUs = "gpus"
	colCost = "cost_per_hour"
)

// groupMetrics pulls every metric of every group out of a built report, in
// group order ("all" first). A column the report no longer has is an error:
// the sweep and the report must change together.
func groupMetrics(rep *report.Report, withSLO bool) ([]string, [][]float64, error) {
	tables := map[string]*report.Table{}
	for _, t := range rep.Tables {
		tables[t.Name] = t
	}
	var groups []string
	idx := map[string]int{}
	req := tables["requests"]
	if req == nil {
		return nil, nil, fmt.Errorf("report has no requests table")
	}
	for _, r := range req.Rows {
		g := r[0].String()
		idx[g] = len(groups)
		groups = append(groups, g)
	}
	vals := make([][]float64, len(groups))
	for i := range vals {
		vals[i] = make([]float64, len(Metrics))
		for j := range vals[i] {
			vals[i][j] = math.NaN()
		}
	}
	for j, m := range Metrics {
		if m.slo && !withSLO {
			continue
		}
		t := tables[m.table]
		if t == nil {
			return nil, nil, fmt.Errorf("report has no %s table", m.table)
		}
		c := slices.Index(t.Columns, m.col)
		if c < 0 {
			return nil, nil, fmt.Errorf("report table %s has no column %s", m.table, m.col)
		}
		mc := -1
		if m.row != "" {
			if mc = slices.Index(t.Columns, "metric"); mc < 0 {
				return nil, nil, fmt.Errorf("report table %s has no metric column", m.table)
			}
		}
		for _, r := range t.Rows {
			gi, ok := idx[r[0].String()]
			if !ok || (mc >= 0 && r[mc].String() != m.row) {
				continue // per-class SLO rows without --by: not a group
			}
			if c < len(r) && r[c].IsNum {
				vals[gi][j] = r[c].Num
			}
		}
	}
	return groups, vals, nil
}
