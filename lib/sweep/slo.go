package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Constraint is one condition of a capacity search: a summary metric
// compared with a target, e.g. ttft_p99_ms <= 500.
type Constraint struct {
	Text   string // as written
	Metric string // summary column
	Op     string // <=, <, >=, >
	Value  float64
}

// metricAliases are the short names of --slo constraints.
var metricAliases = map[string]string{
	"attainment": "slo_all_met_pct",
	"goodput":    "goodput_req_per_s",
	"throughput": "req_per_s",
}

// resolveMetric maps a constraint's name to a summary column: a column
// name, an alias, or <stat>_<metric> (p99_ttft, mean_e2e, max_tpot).
func resolveMetric(name string) (string, error) {
	if m, ok := metricAliases[name]; ok {
		return m, nil
	}
	if slices.ContainsFunc(Metrics, func(m Metric) bool { return m.Name == name }) {
		return name, nil
	}
	if st, m, ok := strings.Cut(name, "_"); ok && slices.Contains(latencyStats, st) {
		col := m + "_" + st + "_ms"
		if slices.ContainsFunc(Metrics, func(x Metric) bool { return x.Name == col }) {
			return col, nil
		}
	}
	var names []string
	for _, m := range Metrics {
		names = append(names, m.Name)
	}
	return "", fmt.Errorf("unknown metric %q: expected p99_ttft-style names (mean, p50, p90, p95, p99, max of ttft, tpot, e2e, queue_enqueued, queue_arrival), attainment, goodput, throughput, or a summary column (%s)", name, strings.Join(names, ", "))
}

// ParseConstraints reads --slo expressions: comma-separated
// "metric op value" terms such as "p99_ttft<=500ms,attainment>=0.99".
// Durations (500ms, 2s) apply to millisecond metrics; attainment is a
// fraction (0.99) or a percentage (99%); other values are in the column's
// unit.
func ParseConstraints(exprs []string) ([]Constraint, error) {
	var out []Constraint
	for _, e := range exprs {
		for _, term := range strings.Split(e, ",") {
			term = strings.TrimSpace(term)
			if term == "" {
				continue
			}
			c, err := parseConstraint(term)
			if err != nil {
				return nil, fmt.Errorf("--slo %q: %v", term, err)
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--slo: expected at least one constraint such as p99_ttft<=500ms")
	}
	return out, nil
}

func parseConstraint(term string) (Constraint, error) {
	c := Constraint{Text: term}
	i := strings.IndexAny(term, "<>=")
	if i <= 0 {
		return c, fmt.Errorf("expected metric<=value or metric>=value")
	}
	name, rest := strings.TrimSpace(term[:i]), term[i:]
	for _, op := range []string{"<=", ">=", "<", ">"} {
		if strings.HasPrefix(rest, op) {
			c.Op, rest = op, strings.TrimSpace(rest[len(op):])
			break
		}
	}
	if c.Op == "" {
		return c, fmt.Errorf("expected one of <=, <, >=, > after %s", name)
	}
	m, err := resolveMetric(name)
	if err != nil {
		return c, err
	}
	c.Metric = m
	unit := ""
	for _, x := range Metrics {
		if x.Name == m {
			unit = x.Unit
		}
	}
	switch {
	case rest == "":
		return c, fmt.Errorf("missing value after %s", c.Op)
	case strings.HasSuffix(rest, "%"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(rest, "%"), 64)
		if err != nil || unit != "%" {
			return c, fmt.Errorf("%s: a percentage applies to %% metrics only, found %q", name, rest)
		}
		c.Value = v
	case unit == "ms" && !isPlainNumber(rest):
		d, err := time.ParseDuration(rest)
		if err != nil {
			return c, fmt.Errorf("%s: expected a duration such as 500ms or 2s, found %q", name, rest)
		}
		c.Value = float64(d) / float64(time.Millisecond)
	default:
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return c, fmt.Errorf("%s: expected a number, found %q", name, rest)
		}
		if name == "attainment" {
			if v < 0 || v > 1 {
				return c, fmt.Errorf("attainment: expected a fraction in [0, 1] such as 0.99 (or 99%%), found %s", rest)
			}
			v *= 100
		}
		c.Value = v
	}
	return c, nil
}

func isPlainNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// met reports whether a value meets the constraint.
func (c Constraint) met(v float64) bool {
	switch c.Op {
	case "<=":
		return v <= c.Value
	case "<":
		return v < c.Value
	case ">=":
		return v >= c.Value
	}
	return v > c.Value
}

// upper reports whether the constraint bounds the metric from above.
func (c Constraint) upper() bool { return c.Op[0] == '<' }

// needsRequestSLO reports whether the constraint is about per-request SLO
// attainment, which needs per-request targets in the report.
func (c Constraint) needsRequestSLO() bool {
	return strings.HasPrefix(c.Metric, "slo_") || c.Metric == "goodput_req_per_s"
}

// requestSLO derives per-request targets from the latency constraints: for
// each of ttft, tpot and e2e bounded from above, the loosest bound given
// (a request meets p99_ttft<=500ms's target when its ttft is <= 500 ms).
func requestSLO(cs []Constraint) string {
	var parts []string
	for _, m := range []string{"ttft", "tpot", "e2e"} {
		best := math.NaN()
		for _, c := range cs {
			if strings.HasPrefix(c.Metric, m+"_") && strings.HasSuffix(c.Metric, "_ms") && c.upper() {
				if math.IsNaN(best) || c.Value > best {
					best = c.Value
				}
			}
		}
		if !math.IsNaN(best) {
			d := time.Duration(math.Round(best*1000)) * time.Microsecond
			parts = append(parts, m+"="+d.String())
		}
	}
	return strings.Join(parts, ",")
}

// Verdict is the judgement of one point against the constraints.
type Verdict struct {
	Pass    bool
	N       int       // replications judged
	Mean    []float64 // per constraint
	Half    []float64 // CI half-width per constraint (0 with one replication)
	Failing []string  // the constraints missed, with their values
	Error   string    // the point's runs failed
}

// judge decides whether a point meets every constraint. With several
// replications, a constraint is met when the confidence interval of its mean
// lies on the right side of the target (the pessimistic end: upper end for
// <=, lower for >=); confidence 0 decides on the mean.
func judge(cs []Constraint, recs []*Record, confidence float64) Verdict {
	v := Verdict{Pass: true, Mean: make([]float64, len(cs)), Half: make([]float64, len(cs))}
	var ok []*Record
	for _, r := range recs {
		if r.Error != "" {
			v.Pass, v.Error = false, r.Error
			continue
		}
		ok = append(ok, r)
	}
	v.N = len(ok)
	if v.Error != "" || len(ok) == 0 {
		v.Pass = false
		for i := range cs {
			v.Mean[i], v.Half[i] = math.NaN(), math.NaN()
		}
		return v
	}
	for i, c := range cs {
		var xs []float64
		undefined := false
		for _, r := range ok {
			x := math.NaN()
			if len(r.Groups) > 0 {
				if p := r.Groups[0].Metrics[c.Metric]; p != nil {
					x = *p
				}
			}
			if math.IsNaN(x) {
				undefined = true
			}
			xs = append(xs, x)
		}
		if undefined {
			v.Mean[i], v.Half[i] = math.NaN(), math.NaN()
			v.Pass = false
			v.Failing = append(v.Failing, fmt.Sprintf("%s undefined (no completed requests?)", c.Metric))
			continue
		}
		mean, half := meanHalf(xs, confidence)
		v.Mean[i], v.Half[i] = mean, half
		edge := mean + half
		if !c.upper() {
			edge = mean - half
		}
		if !c.met(edge) {
			v.Pass = false
			s := fmt.Sprintf("%s = %s", c.Metric, fmtNum(mean))
			if half > 0 {
				s += " ± " + fmtNum(half)
			}
			v.Failing = append(v.Failing, s+" (target "+c.Op+" "+fmtNum(c.Value)+")")
		}
	}
	return v
}

// meanHalf is the mean and the half-width of its two-sided CI at the
// confidence level (Student's t; 0 for one value or confidence 0).
func meanHalf(xs []float64, confidence float64) (float64, float64) {
	n := len(xs)
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n < 2 || confidence <= 0 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.5 + confidence/2)
	return mean, t * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
}

func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
