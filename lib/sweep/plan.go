package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// Point is one combination of axis values (seeds aside).
type Point struct {
	Index  int
	Values []*yaml.Node // one per Spec.Axes
}

// Run is one simulation: a point and a seed.
type Run struct {
	ID          string // SHA-256 of the fully resolved inputs
	Point       *Point
	Replication int
	Seed        uint64
	HasSeed     bool
	Invalid     string // the combination is not a valid config: why

	cluster  *cluster
	workload *resolvedWorkload
	wkey     string // identity of the workload alone (for the in-memory cache)
}

// Plan is every run of a sweep, in a stable order: points in axis order
// (the first axis varies slowest), replications innermost.
type Plan struct {
	Spec   *Spec
	Points []*Point
	Runs   []*Run
	// Duplicates counts sample points dropped because an earlier point had
	// the same values.
	Duplicates int
}

// Build is the build identity of the simulator: part of every run's hash,
// so results of another version are not reused.
func Build() string {
	v := "blis " + trace.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v += " " + s.Value
			case "vcs.modified":
				if s.Value == "true" {
					v += "+modified"
				}
			}
		}
	}
	return v
}

// NewPlan expands the spec into points and runs and resolves each run's
// inputs (the real parsers check every combination).
func NewPlan(s *Spec) (*Plan, error) {
	p := &Plan{Spec: s}
	switch s.Sampling.Method {
	case "grid":
		for _, a := range s.Axes {
			if len(a.Values) == 0 {
				return nil, s.errAt(a.Line, "axes: %s: a grid over the continuous range %g..%g needs steps (how many values) or step; random and lhs sampling and --find take it as is", a.Name, a.Range.From, a.Range.To)
			}
		}
		p.Points = gridPoints(s.Axes)
	default:
		p.Points, p.Duplicates = samplePoints(s)
	}
	seeds := s.Seeds
	r := &resolver{spec: s, build: Build(), clusters: map[string]*cluster{}, workloads: map[string]*resolvedWorkload{}, wkeys: map[*resolvedWorkload]string{}}
	for _, pt := range p.Points {
		reps := len(seeds)
		if reps == 0 {
			reps = 1
		}
		for i := 0; i < reps; i++ {
			run := &Run{Point: pt, Replication: i}
			if len(seeds) > 0 {
				run.Seed, run.HasSeed = seeds[i], true
			}
			if err := r.resolve(run, nil); err != nil {
				return nil, err
			}
			p.Runs = append(p.Runs, run)
		}
	}
	if err := p.checkValues(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkValues reports a value that makes every run it appears in invalid:
// the value is wrong, not the combination. Values invalid only in some
// combinations (256 batched tokens with 512 sequences) are failed runs.
func (p *Plan) checkValues() error {
	s := p.Spec
	for i, a := range s.Axes {
		type tally struct {
			n, bad int
			why    string
		}
		count := map[string]*tally{}
		var order []string
		for _, r := range p.Runs {
			k := flowString(r.Point.Values[i])
			t := count[k]
			if t == nil {
				t = &tally{}
				count[k] = t
				order = append(order, k)
			}
			t.n++
			if r.Invalid != "" {
				t.bad++
				if t.why == "" {
					t.why = r.Invalid
				}
			}
		}
		for _, k := range order {
			if t := count[k]; t.bad == t.n {
				return s.errAt(a.Line, "axes: %s: value %s: %s", a.Name, k, t.why)
			}
		}
	}
	if len(s.Axes) == 0 && len(p.Runs) > 0 && p.Runs[0].Invalid != "" {
		return s.errAt(0, "%s", p.Runs[0].Invalid)
	}
	return nil
}

// gridPoints is the Cartesian product of the axes' values.
func gridPoints(axes []*Axis) []*Point {
	n := 1
	for _, a := range axes {
		n *= len(a.Values)
	}
	pts := make([]*Point, 0, n)
	idx := make([]int, len(axes))
	for k := 0; k < n; k++ {
		pt := &Point{Index: k, Values: make([]*yaml.Node, len(axes))}
		for i, a := range axes {
			pt.Values[i] = a.Values[idx[i]]
		}
		pts = append(pts, pt)
		for i := len(axes) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(axes[i].Values) {
				break
			}
			idx[i] = 0
		}
	}
	return pts
}

// samplePoints draws Sampling.Points points: independently uniform per axis
// (random) or a Latin hypercube (lhs: each axis's range cut in n equal
// strata, one point per stratum, strata paired at random). A list axis
// picks the value whose share of [0, 1) holds the draw; a range axis maps
// it linearly (or geometrically with scale log), rounded on integer keys.
// Each axis has its own random stream, so adding an axis does not move the
// others' draws.
func samplePoints(s *Spec) ([]*Point, int) {
	n := s.Sampling.Points
	u := make([][]float64, len(s.Axes))
	for i, a := range s.Axes {
		g := rng.New(s.Sampling.Seed, "sweep/"+s.Sampling.Method+"/"+a.Name)
		u[i] = make([]float64, n)
		if s.Sampling.Method == "lhs" {
			perm := g.Perm(n)
			for k := 0; k < n; k++ {
				u[i][k] = (float64(perm[k]) + g.Float64()) / float64(n)
			}
		} else {
			for k := 0; k < n; k++ {
				u[i][k] = g.Float64()
			}
		}
	}
	var pts []*Point
	seen := map[string]bool{}
	dups := 0
	for k := 0; k < n; k++ {
		pt := &Point{Index: len(pts), Values: make([]*yaml.Node, len(s.Axes))}
		var key strings.Builder
		for i, a := range s.Axes {
			pt.Values[i] = a.at(u[i][k])
			key.WriteString(flowString(pt.Values[i]))
			key.WriteByte(0)
		}
		if seen[key.String()] {
			dups++
			continue
		}
		seen[key.String()] = true
		pts = append(pts, pt)
	}
	return pts, dups
}

// at maps a uniform draw in [0, 1) to a value of the axis.
func (a *Axis) at(u float64) *yaml.Node {
	if a.Range == nil {
		i := min(int(u*float64(len(a.Values))), len(a.Values)-1)
		return a.Values[i]
	}
	r := a.Range
	var x float64
	if r.Log {
		x = math.Exp(math.Log(r.From) + u*(math.Log(r.To)-math.Log(r.From)))
	} else {
		x = r.From + u*(r.To-r.From)
	}
	if a.Int {
		// Equal chances for every integer in [from, to].
		x = math.Floor(r.From + u*(r.To-r.From+1))
		if r.Log {
			x = math.Floor(math.Exp(math.Log(r.From) + u*(math.Log(r.To+1)-math.Log(r.From))))
		}
		x = math.Min(x, r.To)
	}
	return r.node(x, a.Int)
}

// resolver turns points into checked configs and run ids, reusing the
// parse of repeated documents.
type resolver struct {
	spec      *Spec
	build     string
	clusters  map[string]*cluster
	workloads map[string]*resolvedWorkload
	wkeys     map[*resolvedWorkload]string
	dig       digests
}

// resolve fills run's configs and id; override, when set, replaces the
// value of one axis (capacity search probes).
func (r *resolver) resolve(run *Run, override map[int]*yaml.Node) error {
	s := r.spec
	cdoc, wdoc := cloneNode(s.cluster), cloneNode(s.workload.doc)
	for i, a := range s.Axes {
		v := run.Point.Values[i]
		if o, ok := override[i]; ok {
			v = o
		}
		if v == nil {
			continue
		}
		doc := cdoc
		if a.target == tgtWorkload {
			doc = wdoc
		}
		if err := setPath(doc, a.path, cloneNode(v)); err != nil {
			return s.errAt(a.Line, "axes: %s: %v", a.Name, err)
		}
	}
	if run.HasSeed {
		mapSet(cdoc, "seed", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(run.Seed, 10)})
		s.workload.setSeed(wdoc, run.Seed)
	}
	cb, err := encodeNode(cdoc)
	if err != nil {
		return err
	}
	wb, err := encodeNode(wdoc)
	if err != nil {
		return err
	}
	c, ok := r.clusters[string(cb)]
	if !ok {
		c, err = parseCluster(s.clusterName, cb)
		if err != nil {
			run.Invalid = stripName(err, s.clusterName)
			c = nil
		}
		r.clusters[string(cb)] = c
	}
	w, ok := r.workloads[string(wb)]
	if !ok {
		w, err = s.workload.parse(wdoc)
		if err != nil {
			if run.Invalid == "" {
				run.Invalid = "workload: " + stripName(err, s.workload.name)
			}
			w = nil
		}
		r.workloads[string(wb)] = w
	}
	if c == nil && run.Invalid == "" {
		run.Invalid = "invalid cluster config" // reported when first parsed
	}
	if w == nil && run.Invalid == "" {
		run.Invalid = "invalid workload"
	}
	run.cluster, run.workload = c, w
	if run.Invalid != "" {
		// Still content-addressed, by the documents themselves.
		run.ID = hashJSON(struct{ Build, Cluster, Workload, Invalid string }{r.build, string(cb), string(wb), run.Invalid})
		return nil
	}
	wid, err := w.identity(&r.dig)
	if err != nil {
		return err
	}
	wk, ok := r.wkeys[w]
	if !ok {
		wk = hashJSON(wid)
		r.wkeys[w] = wk
	}
	run.wkey = wk
	var files []string
	for _, f := range c.files() {
		h, err := r.dig.of(f)
		if err != nil {
			return err
		}
		files = append(files, h)
	}
	run.ID = hashJSON(struct {
		Format       int
		Build        string
		Cluster      string
		ClusterFiles []string
		Workload     any
		Report       ReportOptions
	}{recordFormat, r.build, string(c.canonical()), files, wid, s.Report})
	return nil
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sweep: hashing plain values: %v", err)) // plain structs, maps and strings: cannot fail
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
