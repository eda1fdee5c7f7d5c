package synth

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	blisrng "github.com/blis-sim/blis/lib/rng"

	"gonum.org/v1/gonum/stat/distuv"
)

// Dist is a probability distribution from the spec. A bare number is a constant.
type Dist struct {
	Kind    string    `yaml:"dist"`
	Value   *float64  `yaml:"value"`
	Min     *float64  `yaml:"min"`
	Max     *float64  `yaml:"max"`
	Mean    *float64  `yaml:"mean"`
	Std     *float64  `yaml:"std"`
	Mu      *float64  `yaml:"mu"`
	Sigma   *float64  `yaml:"sigma"`
	Scale   *float64  `yaml:"scale"`
	Shape   *float64  `yaml:"shape"`
	Rate    *float64  `yaml:"rate"`
	Values  []float64 `yaml:"values"`
	Weights []float64 `yaml:"weights"`
	Edges   []float64 `yaml:"edges"`
	Counts  []float64 `yaml:"counts"`
	Path    string    `yaml:"path"`
	Column  string    `yaml:"column"`

	kind     int
	a, b     float64 // kind parameters
	lo, hi   float64 // clamps (-Inf, +Inf when absent)
	vals     []float64
	cum      []float64 // cumulative weights for empirical
	histo    bool
	constant bool
}

// YAMLScalarForm accepts a number as a constant distribution.
func (*Dist) YAMLScalarForm(v string) error {
	if _, err := strconv.ParseFloat(v, 64); err != nil {
		return fmt.Errorf("expected a number or a distribution such as {dist: uniform, min: 1, max: 10}, found %q", v)
	}
	return nil
}

// UnmarshalYAML accepts a bare number (a constant) or a mapping. The
// function form keeps the decoder's KnownFields setting.
func (d *Dist) UnmarshalYAML(unmarshal func(any) error) error {
	var f float64
	if err := unmarshal(&f); err == nil {
		*d = Dist{Kind: "constant", Value: &f}
		return nil
	}
	type plain Dist
	return unmarshal((*plain)(d))
}

const (
	dConstant = iota
	dUniform
	dNormal
	dLogNormal
	dExponential
	dPareto
	dWeibull
	dGamma
	dEmpirical
)

var distParams = map[string][]string{
	"constant":    {"value"},
	"uniform":     {"min", "max"},
	"normal":      {"mean", "std", "min", "max"},
	"gaussian":    {"mean", "std", "min", "max"},
	"lognormal":   {"mu", "sigma", "min", "max"},
	"exponential": {"mean", "rate", "min", "max"},
	"pareto":      {"scale", "shape", "min", "max"},
	"weibull":     {"scale", "shape", "min", "max"},
	"gamma":       {"shape", "scale", "min", "max"},
	"empirical":   {"values", "weights", "edges", "counts", "path", "column", "min", "max"},
}

var distNames = []string{"constant", "uniform", "normal", "gaussian", "lognormal", "exponential", "pareto", "weibull", "gamma", "empirical"}

func (d *Dist) given() []string {
	var g []string
	add := func(name string, ok bool) {
		if ok {
			g = append(g, name)
		}
	}
	add("value", d.Value != nil)
	add("min", d.Min != nil)
	add("max", d.Max != nil)
	add("mean", d.Mean != nil)
	add("std", d.Std != nil)
	add("mu", d.Mu != nil)
	add("sigma", d.Sigma != nil)
	add("scale", d.Scale != nil)
	add("shape", d.Shape != nil)
	add("rate", d.Rate != nil)
	add("values", d.Values != nil)
	add("weights", d.Weights != nil)
	add("edges", d.Edges != nil)
	add("counts", d.Counts != nil)
	add("path", d.Path != "")
	add("column", d.Column != "")
	return g
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// compile checks parameters and prepares sampling. what names the field for messages.
func (s *Spec) compileDist(d *Dist, p path, what string) error {
	if d == nil {
		return nil
	}
	if d.Kind == "" {
		return s.errAt(p, "%s: missing dist (one of %s)", what, strings.Join(distNames, ", "))
	}
	allowed, ok := distParams[d.Kind]
	if !ok {
		return s.errAt(p.add("dist"), "%s: unknown dist %q (expected one of %s)", what, d.Kind, strings.Join(distNames, ", "))
	}
	for _, g := range d.given() {
		if !slices.Contains(allowed, g) {
			return s.errAt(p.add(g), "%s: %s does not apply to a %s distribution (it takes %s)", what, g, d.Kind, strings.Join(allowed, ", "))
		}
	}
	need := func(name string, v *float64, positive bool) (float64, error) {
		if v == nil {
			return 0, s.errAt(p, "%s: a %s distribution needs %s", what, d.Kind, name)
		}
		if !finite(*v) || (positive && *v <= 0) {
			return 0, s.errAt(p.add(name), "%s: %s must be a finite number > 0, found %s", what, name, fmtFloat(*v))
		}
		return *v, nil
	}
	d.lo, d.hi = math.Inf(-1), math.Inf(1)
	if d.Kind != "uniform" {
		if d.Min != nil {
			d.lo = *d.Min
		}
		if d.Max != nil {
			d.hi = *d.Max
		}
		if d.lo > d.hi {
			return s.errAt(p.add("min"), "%s: min %s is above max %s", what, fmtFloat(d.lo), fmtFloat(d.hi))
		}
	}
	var err error
	switch d.Kind {
	case "constant":
		d.kind = dConstant
		if d.a, err = need("value", d.Value, false); err != nil {
			return err
		}
		d.constant = true
	case "uniform":
		d.kind = dUniform
		if d.a, err = need("min", d.Min, false); err != nil {
			return err
		}
		if d.b, err = need("max", d.Max, false); err != nil {
			return err
		}
		if d.b < d.a {
			return s.errAt(p.add("max"), "%s: max %s is below min %s", what, fmtFloat(d.b), fmtFloat(d.a))
		}
	case "normal", "gaussian":
		d.kind = dNormal
		if d.a, err = need("mean", d.Mean, false); err != nil {
			return err
		}
		if d.b, err = need("std", d.Std, true); err != nil {
			return err
		}
	case "lognormal":
		d.kind = dLogNormal
		if d.a, err = need("mu", d.Mu, false); err != nil {
			return err
		}
		if d.b, err = need("sigma", d.Sigma, true); err != nil {
			return err
		}
	case "exponential":
		d.kind = dExponential
		switch {
		case d.Mean != nil && d.Rate != nil:
			return s.errAt(p.add("rate"), "%s: give mean or rate, not both", what)
		case d.Rate != nil:
			if d.a, err = need("rate", d.Rate, true); err != nil {
				return err
			}
		default:
			m, err := need("mean", d.Mean, true)
			if err != nil {
				return err
			}
			d.a = 1 / m
		}
	case "pareto", "weibull", "gamma":
		d.kind = map[string]int{"pareto": dPareto, "weibull": dWeibull, "gamma": dGamma}[d.Kind]
		if d.a, err = need("scale", d.Scale, true); err != nil {
			return err
		}
		if d.b, err = need("shape", d.Shape, true); err != nil {
			return err
		}
	case "empirical":
		d.kind = dEmpirical
		if err := s.compileEmpirical(d, p, what); err != nil {
			return err
		}
	}
	return nil
}

func (s *Spec) compileEmpirical(d *Dist, p path, what string) error {
	forms := 0
	if d.Values != nil {
		forms++
	}
	if d.Edges != nil {
		forms++
	}
	if d.Path != "" {
		forms++
	}
	if forms != 1 {
		return s.errAt(p, "%s: an empirical distribution needs exactly one of values (with optional weights), edges with counts, or path with column", what)
	}
	weights := func(w []float64, n int, field string) error {
		if len(w) != n {
			return s.errAt(p.add(field), "%s: %d %s for %d values", what, len(w), field, n)
		}
		total := 0.0
		d.cum = make([]float64, n)
		for i, x := range w {
			if !finite(x) || x < 0 {
				return s.errAt(p.add(field), "%s: %s must be finite and >= 0, found %s", what, field, fmtFloat(x))
			}
			total += x
			d.cum[i] = total
		}
		if total <= 0 {
			return s.errAt(p.add(field), "%s: %s sum to 0", what, field)
		}
		return nil
	}
	switch {
	case d.Values != nil:
		if d.Counts != nil {
			return s.errAt(p.add("counts"), "%s: counts go with edges; use weights with values", what)
		}
		if len(d.Values) == 0 {
			return s.errAt(p.add("values"), "%s: values is empty", what)
		}
		for _, v := range d.Values {
			if !finite(v) {
				return s.errAt(p.add("values"), "%s: values must be finite, found %s", what, fmtFloat(v))
			}
		}
		d.vals = d.Values
		w := d.Weights
		if w == nil {
			w = make([]float64, len(d.vals))
			for i := range w {
				w[i] = 1
			}
		}
		return weights(w, len(d.vals), "weights")
	case d.Edges != nil:
		if d.Weights != nil {
			return s.errAt(p.add("weights"), "%s: weights go with values; use counts with edges", what)
		}
		if len(d.Edges) < 2 {
			return s.errAt(p.add("edges"), "%s: edges needs at least 2 values", what)
		}
		for i := 1; i < len(d.Edges); i++ {
			if !finite(d.Edges[i]) || !finite(d.Edges[i-1]) || d.Edges[i] <= d.Edges[i-1] {
				return s.errAt(p.add("edges"), "%s: edges must be finite and increasing", what)
			}
		}
		d.vals = d.Edges
		d.histo = true
		return weights(d.Counts, len(d.Edges)-1, "counts")
	default:
		if d.Column == "" {
			return s.errAt(p.add("path"), "%s: path needs column (the CSV header name)", what)
		}
		if d.Weights != nil || d.Counts != nil {
			return s.errAt(p.add("path"), "%s: a column is sampled uniformly; weights and counts do not apply", what)
		}
		vals, err := s.readColumn(d.Path, d.Column, p.add("path"), what)
		if err != nil {
			return err
		}
		d.vals = vals
		d.cum = nil
	}
	return nil
}

// readColumn reads one numeric CSV column (by header name).
func (s *Spec) readColumn(rel, column string, p path, what string) ([]float64, error) {
	full := s.resolve(rel)
	recs, err := readCSVColumn(full, column, func(v string, line int) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !finite(f) {
			return 0, fmt.Errorf("%s:%d: column %s: expected a number, found %q", full, line, column, v)
		}
		return f, nil
	})
	if err != nil {
		return nil, s.errAt(p, "%s: %v", what, err)
	}
	if len(recs) == 0 {
		return nil, s.errAt(p, "%s: %s has no rows", what, full)
	}
	s.Inputs = append(s.Inputs, full)
	return recs, nil
}

func readCSVColumn[T any](file, column string, parse func(v string, line int) (T, error)) ([]T, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading the header: %v", file, err)
	}
	col := -1
	for i, h := range hdr {
		if strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) == column {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("%s: no column %q (header: %s)", file, column, strings.Join(hdr, ","))
	}
	var out []T
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		if col >= len(rec) {
			return nil, fmt.Errorf("%s:%d: expected %d fields, found %d", file, line, col+1, len(rec))
		}
		v, err := parse(rec[col], line)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// lower returns the smallest value the distribution can produce.
func (d *Dist) lower() float64 {
	var l float64
	switch d.kind {
	case dConstant:
		l = d.a
	case dUniform:
		return d.a
	case dNormal:
		l = math.Inf(-1)
	case dLogNormal, dExponential, dWeibull, dGamma:
		l = 0
	case dPareto:
		l = d.a
	case dEmpirical:
		l = slices.Min(d.vals)
	}
	return math.Max(l, d.lo)
}

// upper returns the largest value the distribution can produce.
func (d *Dist) upper() float64 {
	var u float64
	switch d.kind {
	case dConstant:
		u = d.a
	case dUniform:
		return d.b
	case dEmpirical:
		u = slices.Max(d.vals)
	default:
		u = math.Inf(1)
	}
	return math.Min(u, d.hi)
}

// rng is one purpose's random stream.
type rng struct {
	src *rand.PCG
	r   *rand.Rand
}

// newRNG returns stream name under the master seed (see lib/rng).
func newRNG(seed uint64, name string) rng {
	src := blisrng.PCG(seed, name)
	return rng{src: src, r: rand.New(src)}
}

// Sample draws one value.
func (d *Dist) Sample(g rng) float64 {
	if d.constant {
		return d.a
	}
	var x float64
	switch d.kind {
	case dUniform:
		x = d.a + (d.b-d.a)*g.r.Float64()
		return x
	case dNormal:
		x = distuv.Normal{Mu: d.a, Sigma: d.b, Src: g.src}.Rand()
	case dLogNormal:
		x = distuv.LogNormal{Mu: d.a, Sigma: d.b, Src: g.src}.Rand()
	case dExponential:
		x = distuv.Exponential{Rate: d.a, Src: g.src}.Rand()
	case dPareto:
		x = distuv.Pareto{Xm: d.a, Alpha: d.b, Src: g.src}.Rand()
	case dWeibull:
		x = distuv.Weibull{Lambda: d.a, K: d.b, Src: g.src}.Rand()
	case dGamma:
		// distuv's Beta is a rate: 1/scale.
		x = distuv.Gamma{Alpha: d.b, Beta: 1 / d.a, Src: g.src}.Rand()
	case dEmpirical:
		switch {
		case d.cum == nil:
			x = d.vals[g.r.IntN(len(d.vals))]
		case d.histo:
			i := pick(d.cum, g.r.Float64())
			x = d.vals[i] + (d.vals[i+1]-d.vals[i])*g.r.Float64()
		default:
			x = d.vals[pick(d.cum, g.r.Float64())]
		}
	}
	if x < d.lo {
		x = d.lo
	} else if x > d.hi {
		x = d.hi
	}
	return x
}

// pick returns the index whose cumulative weight covers u·total.
func pick(cum []float64, u float64) int {
	t := u * cum[len(cum)-1]
	i := sort.SearchFloat64s(cum, t)
	for i < len(cum)-1 && cum[i] <= t { // skip zero-weight entries at the boundary
		i++
	}
	if i >= len(cum) {
		i = len(cum) - 1
	}
	return i
}

// tokens draws a token count: rounded to the nearest integer, at least 1.
func (d *Dist) tokens(g rng) int32 {
	x := math.Round(d.Sample(g))
	if x < 1 {
		return 1
	}
	if x > math.MaxInt32/4 {
		return math.MaxInt32 / 4
	}
	return int32(x)
}

// micros draws a time in seconds and returns µs (never negative: validated).
func (d *Dist) micros(g rng) int64 {
	x := d.Sample(g)
	if x <= 0 {
		return 0
	}
	return int64(math.Round(math.Min(x, maxSeconds) * 1e6))
}

// maxSeconds caps a sampled time (about 31 years) so a heavy tail cannot overflow µs.
const maxSeconds = 1e9

// count draws a positive integer count, clamped to [1, max].
func (d *Dist) count(g rng, max int) int {
	x := math.Round(d.Sample(g))
	if x < 1 {
		return 1
	}
	if x > float64(max) {
		return max
	}
	return int(x)
}
