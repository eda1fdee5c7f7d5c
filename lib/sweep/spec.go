// Package sweep runs many simulations of one cluster, policy and workload
// with some of their keys varied (a grid, or a seeded random or
// Latin-hypercube sample), with seeds as replications, and summarises every
// run in one table. Runs are content-addressed by the hash of their fully
// resolved inputs, so a sweep resumes where it stopped and a rerun skips
// what is done; a sweep can be split into shards for Slurm job arrays or
// Kubernetes Indexed Jobs. It also searches for capacity: the fewest
// replicas, or the highest rate, that meets latency SLOs. docs/sweep.md is
// the user reference.
package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/synth"
)

// Spec is a parsed sweep spec.
type Spec struct {
	Name string // the sweep's name (the file's base name unless given)
	File string // the spec file, for messages ("" when parsed from bytes)
	Dir  string // base of relative paths

	cluster     *yaml.Node // the base cluster document (a mapping)
	clusterName string     // its file, for messages
	workload    *workload

	Report   ReportOptions
	Cost     map[string]float64 // $ per GPU-hour by GPU name
	Sampling Sampling
	Axes     []*Axis // in file order; the seed axis is not among them
	Seeds    []uint64
	seedLine int
}

// ReportOptions are the blis-report options every run is summarised with.
type ReportOptions struct {
	SLO []string // blis-report --slo specs
	By  string   // blis-report --by key ("" = one group, "all")
}

// Sampling chooses the points of the sweep.
type Sampling struct {
	Method string // grid (default), random or lhs
	Points int    // random and lhs: number of points
	Seed   uint64 // random and lhs: the sample's seed
}

// Axis is one swept key.
type Axis struct {
	Name   string // the key as written (a column of the summary)
	Line   int
	target int    // tgtCluster or tgtWorkload
	path   []elem // within the target document
	Values []*yaml.Node
	Range  *Range // a from/to axis (Values holds its grid when it has one)
	Int    bool   // integer-valued (from the key's type, or integer endpoints)
	goType reflect.Type
}

// Range is a numeric axis from From to To.
type Range struct {
	From, To float64
	Step     float64 // grid: From, From+Step, ... <= To
	Steps    int     // grid: Steps values evenly spaced (geometrically when Log)
	Log      bool
}

const (
	tgtCluster = iota
	tgtWorkload
)

// MaxRuns bounds a sweep's plan.
const MaxRuns = 10_000_000

var topKeys = []string{"name", "cluster", "workload", "report", "cost", "sampling", "axes"}

// Load reads a sweep spec file.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return Parse(b, path, dir)
}

// errAt formats an error at a line of the spec.
func (s *Spec) errAt(line int, format string, args ...any) error {
	name := s.File
	if name == "" {
		name = "<spec>"
	}
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
}

// Parse reads a sweep spec from bytes; name is used in messages and dir
// resolves relative paths.
func Parse(data []byte, name, dir string) (*Spec, error) {
	s := &Spec{File: name, Dir: dir, Sampling: Sampling{Method: "grid"}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, s.errAt(0, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	root := docRoot(&doc)
	if root == nil || root.Kind == 0 {
		return nil, s.errAt(0, "empty sweep spec: it needs at least axes")
	}
	if root.Kind != yaml.MappingNode {
		return nil, s.errAt(root.Line, "expected a mapping of %s", strings.Join(topKeys, ", "))
	}
	if name != "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	var axesNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		var err error
		switch k.Value {
		case "name":
			err = v.Decode(&s.Name)
			if err == nil && !validName(s.Name) {
				err = fmt.Errorf("name: expected letters, digits, '.', '_' or '-', found %q", s.Name)
			}
		case "cluster":
			err = s.loadCluster(v)
		case "workload":
			s.workload, err = s.loadWorkload(v)
		case "report":
			err = s.parseReport(v)
		case "cost":
			err = s.parseCost(v)
		case "sampling":
			err = s.parseSampling(v)
		case "axes":
			axesNode = v
		default:
			return nil, s.errAt(k.Line, "%v", unknownKey(k.Value, "the sweep spec", topKeys))
		}
		if err != nil {
			return nil, s.errAt(k.Line, "%s: %v", k.Value, err)
		}
	}
	if s.cluster == nil {
		s.cluster = newMap() // the engine's defaults
		s.clusterName = "<default cluster>"
	}
	if s.workload == nil {
		return nil, s.errAt(root.Line, "workload: missing: give a trace or requests table (workload: {trace: FILE}) or a blis-synth spec (workload: {synth: FILE} or {example: NAME})")
	}
	if axesNode == nil {
		return nil, s.errAt(root.Line, "axes: missing: name at least one key to vary (e.g. axes: {replicas: [2, 4, 8]})")
	}
	if err := s.parseAxes(axesNode); err != nil {
		return nil, err
	}
	if n := s.countRuns(); n > MaxRuns {
		return nil, s.errAt(axesNode.Line, "axes: the sweep has %.0f runs, more than %d: use sampling (random or lhs) or fewer values", n, MaxRuns)
	}
	return s, nil
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for _, c := range n {
		if !(c == '-' || c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// path resolves p against the spec's directory.
func (s *Spec) path(p string) string {
	if p == "" || filepath.IsAbs(p) || s.Dir == "" {
		return p
	}
	return filepath.Join(s.Dir, p)
}

func (s *Spec) loadCluster(v *yaml.Node) error {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil
		}
		var p string
		if err := v.Decode(&p); err != nil {
			return err
		}
		p = s.path(p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var d yaml.Node
		if err := yaml.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%s: %s", p, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		r := docRoot(&d)
		if r == nil || r.Kind == 0 || (r.Kind == yaml.ScalarNode && r.Tag == "!!null") {
			r = newMap()
		}
		if r.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: expected a mapping (a cluster config)", p)
		}
		if _, err := parseCluster(p, b); err != nil {
			return err
		}
		s.cluster, s.clusterName = cloneNode(r), p
	case yaml.MappingNode:
		s.cluster, s.clusterName = cloneNode(v), s.File+" (cluster)"
		b, err := encodeNode(s.cluster)
		if err != nil {
			return err
		}
		if _, err := parseCluster(s.clusterName, b); err != nil {
			return fmt.Errorf("%v", err)
		}
	default:
		return fmt.Errorf("expected a file name or a mapping (a cluster config)")
	}
	return nil
}

func (s *Spec) parseReport(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return errors.New("expected a mapping with slo and by")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "slo":
			if x.Kind == yaml.ScalarNode {
				var one string
				if err := x.Decode(&one); err != nil {
					return err
				}
				s.Report.SLO = []string{one}
			} else if err := x.Decode(&s.Report.SLO); err != nil {
				return fmt.Errorf("slo: expected a blis-report --slo spec or a list of them: %v", err)
			}
		case "by":
			if err := x.Decode(&s.Report.By); err != nil {
				return err
			}
		default:
			return unknownKey(k.Value, "report", []string{"slo", "by"})
		}
	}
	return checkReport(&s.Report)
}

func (s *Spec) parseCost(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return errors.New("expected a mapping of GPU name to $ per GPU-hour (e.g. {h100: 2.49})")
	}
	s.Cost = map[string]float64{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		var f float64
		if err := v.Content[i+1].Decode(&f); err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: expected a non-negative price per GPU-hour, found %q", v.Content[i].Value, v.Content[i+1].Value)
		}
		s.Cost[v.Content[i].Value] = f
	}
	return nil
}

func (s *Spec) parseSampling(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode {
		return v.Decode(&s.Sampling.Method)
	}
	if v.Kind != yaml.MappingNode {
		return errors.New("expected grid, or a mapping {method: random|lhs, points: N, seed: S}")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		var err error
		switch k.Value {
		case "method":
			err = x.Decode(&s.Sampling.Method)
		case "points":
			err = x.Decode(&s.Sampling.Points)
		case "seed":
			err = x.Decode(&s.Sampling.Seed)
		default:
			return unknownKey(k.Value, "sampling", []string{"method", "points", "seed"})
		}
		if err != nil {
			return fmt.Errorf("%s: %s", k.Value, strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
	switch s.Sampling.Method {
	case "grid":
	case "random", "lhs":
		if s.Sampling.Points < 1 || s.Sampling.Points > MaxRuns {
			return fmt.Errorf("points: expected 1..%d points for %s sampling, found %d", MaxRuns, s.Sampling.Method, s.Sampling.Points)
		}
	default:
		return fmt.Errorf("method: expected grid, random or lhs, found %q", s.Sampling.Method)
	}
	return nil
}

func (s *Spec) parseAxes(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return s.errAt(v.Line, "axes: expected a mapping of key: values")
	}
	if len(v.Content) == 0 {
		return s.errAt(v.Line, "axes: empty: name at least one key to vary")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		if seen[k.Value] {
			return s.errAt(k.Line, "axes: %s given twice", k.Value)
		}
		seen[k.Value] = true
		if k.Value == "seed" {
			if err := s.parseSeeds(x); err != nil {
				return s.errAt(k.Line, "axes: seed: %v", err)
			}
			s.seedLine = k.Line
			continue
		}
		a, err := s.parseAxis(k.Value, x)
		if err != nil {
			return s.errAt(k.Line, "axes: %s: %v", k.Value, err)
		}
		a.Line = k.Line
		s.Axes = append(s.Axes, a)
	}
	return nil
}

// MaxReplications bounds the seed axis.
const MaxReplications = 100_000

func (s *Spec) parseSeeds(x *yaml.Node) error {
	switch x.Kind {
	case yaml.MappingNode:
		n, start := 0, uint64(1)
		for i := 0; i+1 < len(x.Content); i += 2 {
			var err error
			switch x.Content[i].Value {
			case "replications":
				err = x.Content[i+1].Decode(&n)
			case "start":
				err = x.Content[i+1].Decode(&start)
			default:
				return unknownKey(x.Content[i].Value, "seed", []string{"replications", "start"})
			}
			if err != nil {
				return fmt.Errorf("%s: %s", x.Content[i].Value, strings.TrimPrefix(err.Error(), "yaml: "))
			}
		}
		if n < 1 || n > MaxReplications {
			return fmt.Errorf("replications: expected 1..%d, found %d", MaxReplications, n)
		}
		if start > math.MaxUint64-uint64(n) {
			return fmt.Errorf("start: %d + %d replications overflows", start, n)
		}
		for i := 0; i < n; i++ {
			s.Seeds = append(s.Seeds, start+uint64(i))
		}
	case yaml.SequenceNode:
		if len(x.Content) == 0 {
			return errors.New("empty list: give at least one seed, or {replications: N}")
		}
		seen := map[uint64]bool{}
		for _, c := range x.Content {
			var v uint64
			if err := c.Decode(&v); err != nil {
				return fmt.Errorf("expected non-negative integer seeds, found %q", c.Value)
			}
			if seen[v] {
				return fmt.Errorf("seed %d given twice", v)
			}
			seen[v] = true
			s.Seeds = append(s.Seeds, v)
		}
	case yaml.ScalarNode:
		var v uint64
		if err := x.Decode(&v); err != nil {
			return fmt.Errorf("expected {replications: N}, a list of seeds or one seed, found %q", x.Value)
		}
		s.Seeds = []uint64{v}
	default:
		return errors.New("expected {replications: N}, a list of seeds or one seed")
	}
	return nil
}

// target splits an axis key into the document it addresses and the path in it.
func (s *Spec) target(name string) (int, []elem, reflect.Type, *yaml.Node, error) {
	p, err := parsePath(name)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	if !p[0].isIdx && p[0].key == "workload" {
		if len(p) == 1 {
			return 0, nil, nil, nil, errors.New("name a key of the workload (workload.aggregate_rate, workload.speedup, ...), not the whole workload")
		}
		return tgtWorkload, p[1:], s.workload.schema(), s.workload.doc, nil
	}
	return tgtCluster, p, clusterType(), s.cluster, nil
}

func (s *Spec) parseAxis(name string, x *yaml.Node) (*Axis, error) {
	tgt, p, schema, doc, err := s.target(name)
	if err != nil {
		return nil, err
	}
	what := "the cluster config"
	if tgt == tgtWorkload {
		what = "the workload"
	}
	t, err := checkKeys(schema, doc, p, what)
	if err != nil {
		return nil, err
	}
	a := &Axis{Name: name, target: tgt, path: p, goType: t, Int: intKind(t)}
	switch x.Kind {
	case yaml.SequenceNode:
		if len(x.Content) == 0 {
			return nil, errors.New("empty list: give at least one value")
		}
		for _, c := range x.Content {
			a.Values = append(a.Values, cloneNode(c))
		}
	case yaml.MappingNode:
		if mapGet(x, "from") == nil && mapGet(x, "to") == nil {
			if mapGet(x, "replications") != nil {
				return nil, errors.New("replications apply to the seed axis only (seed: {replications: N})")
			}
			// A mapping value (e.g. router.weights: {load: 1}) is one value.
			a.Values = []*yaml.Node{cloneNode(x)}
			break
		}
		r, isInt, err := parseRange(x)
		if err != nil {
			return nil, err
		}
		a.Range = r
		if t == nil || t.Kind() == reflect.Interface {
			a.Int = isInt
		}
		// A float range without steps is continuous: for sampling and
		// capacity search; a grid needs its values.
		if a.Int || r.Steps > 0 || r.Step > 0 {
			vals, err := r.grid(a.Int)
			if err != nil {
				return nil, err
			}
			a.Values = vals
		}
	case yaml.ScalarNode, yaml.AliasNode:
		a.Values = []*yaml.Node{cloneNode(x)}
	default:
		return nil, errors.New("expected a list of values, a range {from, to, steps|step} or one value")
	}
	return a, nil
}

// stripName drops a "file:line: " prefix naming a base file: the line is
// the base file's, and the value came from the sweep spec.
func stripName(err error, name string) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, name+":"); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			if _, e := strconv.Atoi(rest[:i]); e == nil {
				return rest[i+2:]
			}
		}
		return strings.TrimSpace(rest)
	}
	return msg
}

func parseRange(x *yaml.Node) (*Range, bool, error) {
	r := &Range{}
	isInt := true
	var have [2]bool
	for i := 0; i+1 < len(x.Content); i += 2 {
		k, v := x.Content[i].Value, x.Content[i+1]
		num := func(dst *float64) error {
			if err := v.Decode(dst); err != nil || math.IsNaN(*dst) || math.IsInf(*dst, 0) {
				return fmt.Errorf("%s: expected a number, found %q", k, v.Value)
			}
			if v.Tag != "!!int" {
				isInt = false
			}
			return nil
		}
		var err error
		switch k {
		case "from":
			err, have[0] = num(&r.From), true
		case "to":
			err, have[1] = num(&r.To), true
		case "step":
			err = num(&r.Step)
			if err == nil && r.Step <= 0 {
				err = fmt.Errorf("step: expected > 0, found %s", v.Value)
			}
		case "steps":
			if err = v.Decode(&r.Steps); err != nil || r.Steps < 1 {
				err = fmt.Errorf("steps: expected a number of values >= 1, found %q", v.Value)
			}
		case "scale":
			var sc string
			if err = v.Decode(&sc); err == nil {
				switch sc {
				case "linear":
				case "log":
					r.Log = true
				default:
					err = fmt.Errorf("scale: expected linear or log, found %q", sc)
				}
			}
		default:
			return nil, false, unknownKey(k, "a range", []string{"from", "to", "step", "steps", "scale"})
		}
		if err != nil {
			return nil, false, err
		}
	}
	switch {
	case !have[0] || !have[1]:
		return nil, false, errors.New("a range needs both from and to")
	case r.From > r.To:
		return nil, false, fmt.Errorf("empty range: from %g is above to %g", r.From, r.To)
	case r.Step > 0 && r.Steps > 0:
		return nil, false, errors.New("give step or steps, not both")
	case r.Log && r.From <= 0:
		return nil, false, fmt.Errorf("scale log needs from > 0, found %g", r.From)
	case r.Log && r.Step > 0:
		return nil, false, errors.New("scale log takes steps (a number of values), not step")
	case r.Steps == 1 && r.From != r.To:
		return nil, false, fmt.Errorf("steps: 1 value cannot span %g..%g: give steps >= 2", r.From, r.To)
	}
	return r, isInt, nil
}

// maxAxisValues bounds one axis's grid.
const maxAxisValues = 1_000_000

// grid lists a range's values: evenly spaced (or geometric) with steps, or
// from, from+step, ... with step (step 1 for integer ranges by default).
// Integer axes round and drop repeats.
func (r *Range) grid(isInt bool) ([]*yaml.Node, error) {
	var xs []float64
	switch {
	case r.Steps > 0:
		for i := 0; i < r.Steps; i++ {
			f := 0.0
			if r.Steps > 1 {
				f = float64(i) / float64(r.Steps-1)
			}
			if r.Log {
				xs = append(xs, math.Exp(math.Log(r.From)+f*(math.Log(r.To)-math.Log(r.From))))
			} else {
				xs = append(xs, r.From+f*(r.To-r.From))
			}
		}
		xs[len(xs)-1] = r.To
	default:
		step := r.Step
		if step == 0 {
			if !isInt {
				return nil, errors.New("a grid over a non-integer range needs steps (how many values) or step")
			}
			step = 1
		}
		if (r.To-r.From)/step >= maxAxisValues {
			return nil, fmt.Errorf("%g..%g by %g is more than %d values", r.From, r.To, step, maxAxisValues)
		}
		for i := 0; ; i++ {
			x := r.From + float64(i)*step
			if x > r.To+step*1e-9 {
				break
			}
			xs = append(xs, math.Min(x, r.To))
		}
	}
	var out []*yaml.Node
	var last float64
	for i, x := range xs {
		if isInt {
			x = math.Round(x)
			if i > 0 && x == last {
				continue
			}
		}
		last = x
		out = append(out, r.node(x, isInt))
	}
	if len(out) == 0 {
		return nil, errors.New("the range has no values")
	}
	return out, nil
}

// node makes a YAML scalar for a generated value.
func (r *Range) node(x float64, isInt bool) *yaml.Node {
	if isInt {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(math.Round(x)), 10)}
	}
	// Round to 12 significant digits: 0.1+0.2 reads as 0.3 in the summary.
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 12, 64), 64)
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(v, 'g', -1, 64)}
}

// countRuns is the number of runs the plan will have (before removing
// duplicate sample points).
func (s *Spec) countRuns() float64 {
	n := 1.0
	if s.Sampling.Method == "grid" {
		for _, a := range s.Axes {
			n *= float64(max(1, len(a.Values)))
		}
	} else {
		n = float64(s.Sampling.Points)
	}
	return n * float64(max(1, len(s.Seeds)))
}

// decodeStrict decodes a node into v rejecting unknown keys.
func decodeStrict(n *yaml.Node, v any) error {
	b, err := encodeNode(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n"), "yaml: ")))
	}
	return nil
}

// synthType is the schema of a synth workload.
func synthType() reflect.Type { return reflect.TypeOf(synth.Spec{}) }
