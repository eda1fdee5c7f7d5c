package fitted

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/blis-sim/blis/lib/yamlcheck"
	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// Coefficients is one coefficients/<model>/<gpu>-tp<N>-<engine>-<version>.yaml file.
type Coefficients struct {
	Model       string `yaml:"model"`                  // catalogue short name or HF id
	GPU         string `yaml:"gpu"`                    // catalogue GPU name
	TP          int    `yaml:"tp"`                     // tensor-parallel ranks
	Engine      string `yaml:"engine"`                 // vllm, sglang, trtllm, ...
	Version     string `yaml:"version"`                // engine version, e.g. 0.8.4
	WeightDtype string `yaml:"weight_dtype,omitempty"` // deployment dtype the data was measured with ("" = config default)
	KVDtype     string `yaml:"kv_dtype,omitempty"`
	Terms       []Term `yaml:"terms"` // step µs = Σ value·feature
	// RooflineEfficiency is the GPU efficiency profile the roofline_*
	// features were computed with. When set, the simulator evaluates those
	// features with it, so later changes to the built-in profiles do not
	// silently change what the coefficients multiply.
	RooflineEfficiency *roofline.Efficiency `yaml:"roofline_efficiency,omitempty"`
	Alpha              latency.Alpha        `yaml:"alpha"`
	Sources            []Source             `yaml:"sources,omitempty"`
	Fit                FitInfo              `yaml:"fit"`
	Notes              string               `yaml:"notes,omitempty"`
}

// Term is one feature and its non-negative coefficient (µs per feature unit).
type Term struct {
	Feature string  `yaml:"feature"`
	Value   float64 `yaml:"value"`
}

// Source is one input the coefficients were fitted on.
type Source struct {
	Path   string `yaml:"path"`
	SHA256 string `yaml:"sha256"`
	Rows   int    `yaml:"rows,omitempty"` // rows used from it
	Filter string `yaml:"filter,omitempty"`
}

// FitInfo records how the fit was made and how well it predicts held-out data.
type FitInfo struct {
	Method    string  `yaml:"method"`           // e.g. nnls, nelder-mead-sim, published
	Target    string  `yaml:"target,omitempty"` // what was matched: step_us, ttft_tpot, ...
	TrainRows int     `yaml:"train_rows"`
	TestRows  int     `yaml:"test_rows"`
	TrainMAPE float64 `yaml:"train_mape"` // percent
	TestMAPE  float64 `yaml:"test_mape"`  // percent, on held-out rows
	Created   string  `yaml:"created,omitempty"`
}

// Features lists the term names in order.
func (c *Coefficients) Features() []string {
	out := make([]string, len(c.Terms))
	for i, t := range c.Terms {
		out[i] = t.Feature
	}
	return out
}

// maxValue bounds every coefficient: larger ones are corrupt files, and
// would overflow the int64 µs step time (Go's float→int conversion of an
// out-of-range value is undefined, on amd64 a negative number).
const maxValue = 1e12

// Validate names the first bad field; path is for the message.
func (c *Coefficients) Validate(p string) error {
	bad := func(field, exp, found string) error {
		return fmt.Errorf("%s: field %s: expected %s, found %s", p, field, exp, found)
	}
	switch {
	case c.Model == "":
		return bad("model", "a model name", "nothing")
	case c.GPU == "":
		return bad("gpu", "a GPU name", "nothing")
	case c.TP < 1:
		return bad("tp", "a positive integer", fmt.Sprint(c.TP))
	case len(c.Terms) == 0:
		return bad("terms", "at least one {feature, value}", "none")
	}
	for i, t := range c.Terms {
		if !(t.Value >= 0) || math.IsInf(t.Value, 0) {
			return bad(fmt.Sprintf("terms[%d].value", i), "a finite non-negative number", fmt.Sprint(t.Value))
		}
		if t.Value > maxValue {
			return bad(fmt.Sprintf("terms[%d].value", i), fmt.Sprintf("at most %g", maxValue), fmt.Sprint(t.Value))
		}
	}
	if _, err := NewEvaluator(c.Features(), nil); err != nil && !strings.Contains(err.Error(), "needs the model") {
		return fmt.Errorf("%s: field terms: %w", p, err)
	}
	for _, f := range []struct {
		n string
		v float64
	}{{"alpha.queue_base_us", c.Alpha.QueueBase}, {"alpha.queue_per_input_token_us", c.Alpha.QueuePerInputToken}, {"alpha.per_output_token_us", c.Alpha.PerOutputToken}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return bad(f.n, "a finite non-negative number", fmt.Sprint(f.v))
		}
		if f.v > maxValue {
			return bad(f.n, fmt.Sprintf("at most %g", maxValue), fmt.Sprint(f.v))
		}
	}
	for _, d := range []struct{ n, v string }{{"weight_dtype", c.WeightDtype}, {"kv_dtype", c.KVDtype}} {
		if d.v != "" {
			if _, err := roofline.ParseDtype(d.v); err != nil {
				return bad(d.n, "bf16, fp16, fp8, int8, fp4 or int4", fmt.Sprintf("%q", d.v))
			}
		}
	}
	return nil
}

// Parse decodes and validates a coefficients document (unknown keys are errors).
func Parse(p string, data []byte) (*Coefficients, error) {
	var c Coefficients
	if err := yamlcheck.Decode(p, data, &c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file, expected a coefficients YAML document", p)
		}
		return nil, err
	}
	if err := c.Validate(p); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads a coefficients file from disk.
func Load(p string) (*Coefficients, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return Parse(p, data)
}

// LoadFS reads a coefficients file from a file system (e.g. the embedded coefficients/).
func LoadFS(fsys fs.FS, p string) (*Coefficients, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	return Parse(p, data)
}

// Marshal renders the file as YAML.
func (c *Coefficients) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Save validates and writes the file (temp file + rename), creating its directory.
func (c *Coefficients) Save(p string) error {
	if err := c.Validate(p); err != nil {
		return err
	}
	data, err := c.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	defer cleanup.Add(tmp)()
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// FileName is the canonical path of the file under coefficients/:
// <model key>/<gpu>-tp<N>-<engine>-<version>.yaml.
func (c *Coefficients) FileName() string {
	return path.Join(roofline.ModelKey(c.Model), fmt.Sprintf("%s-tp%d-%s-%s.yaml",
		gpuKey(c.GPU), c.TP, strings.ToLower(c.Engine), c.Version))
}

func gpuKey(name string) string {
	if g, ok := roofline.LookupGPU(name); ok {
		return g.Name
	}
	return strings.ToLower(name)
}

// Query selects coefficients. Engine, Version and WeightDtype are optional.
type Query struct {
	Model, GPU  string
	TP          int
	Engine      string
	Version     string
	WeightDtype string // deployment weight dtype; files with another dtype don't match
}

// Find returns the path of the best matching file in fsys (rooted at the
// coefficients directory) or "" when none matches. Among several matches the
// newest version wins (numeric comparison of dotted versions), then the
// lexically first path, so the choice is deterministic.
func Find(fsys fs.FS, q Query) (string, *Coefficients, error) {
	dir := roofline.ModelKey(q.Model)
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "not exist") {
			return "", nil, nil
		}
		return "", nil, err
	}
	prefix := fmt.Sprintf("%s-tp%d-", gpuKey(q.GPU), q.TP)
	if q.Engine != "" {
		prefix += strings.ToLower(q.Engine) + "-"
		if q.Version != "" {
			prefix += q.Version
		}
	}
	type cand struct {
		p string
		c *Coefficients
	}
	var cands []cand
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".yaml") || !strings.HasPrefix(n, prefix) {
			continue
		}
		if q.Engine != "" && q.Version != "" && n != prefix+".yaml" {
			continue
		}
		p := path.Join(dir, n)
		c, err := LoadFS(fsys, p)
		if err != nil {
			return "", nil, err
		}
		if q.WeightDtype != "" && c.WeightDtype != "" {
			want, _ := roofline.ParseDtype(q.WeightDtype)
			have, _ := roofline.ParseDtype(c.WeightDtype)
			if want != have {
				continue
			}
		}
		cands = append(cands, cand{p, c})
	}
	if len(cands) == 0 {
		return "", nil, nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if v := compareVersions(cands[i].c.Version, cands[j].c.Version); v != 0 {
			return v > 0
		}
		return cands[i].p < cands[j].p
	})
	return cands[0].p, cands[0].c, nil
}

// compareVersions compares dotted versions numerically where possible.
func compareVersions(a, b string) int {
	as, bs := strings.Split(strings.TrimPrefix(a, "v"), "."), strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y string
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		xi, ex := strconv.Atoi(x)
		yi, ey := strconv.Atoi(y)
		if ex == nil && ey == nil {
			if xi != yi {
				if xi > yi {
					return 1
				}
				return -1
			}
			continue
		}
		if x != y {
			return strings.Compare(x, y)
		}
	}
	return 0
}

// Model is the fitted latency.Model.
type Model struct {
	C     *Coefficients
	ev    *Evaluator
	beta  []float64
	buf   []float64
	label string
}

// NewModel binds coefficients to a roofline (needed only for roofline_* and
// layers features; may be nil otherwise). When the file records the
// roofline efficiency profile it was fitted with, features use that
// profile instead of rf's. label names the source file.
func NewModel(c *Coefficients, rf *roofline.Roofline, label string) (*Model, error) {
	if rf != nil && c.RooflineEfficiency != nil && rf.G.Eff != *c.RooflineEfficiency {
		g := rf.G
		g.Eff = *c.RooflineEfficiency
		r2, err := roofline.New(rf.A, g, rf.TP)
		if err != nil {
			return nil, fmt.Errorf("%s: field roofline_efficiency: %w", label, err)
		}
		rf = r2
	}
	ev, err := NewEvaluator(c.Features(), rf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	m := &Model{C: c, ev: ev, label: "fitted:" + label, buf: make([]float64, len(c.Terms))}
	for _, t := range c.Terms {
		m.beta = append(m.beta, t.Value)
	}
	return m, nil
}

// StepTime implements latency.Model. Not safe for concurrent use (reuses a buffer).
func (m *Model) StepTime(b *latency.Batch) int64 {
	f := m.ev.Features(b, m.buf)
	var s float64
	for i, v := range f {
		s += m.beta[i] * v
	}
	if !(s < maxStepUS) { // huge features times large coefficients
		return maxStepUS
	}
	us := int64(s + 0.5)
	if us < 1 {
		return 1
	}
	return us
}

// maxStepUS caps a step, as every model does (latency.MaxStepUS).
const maxStepUS = latency.MaxStepUS

// Alpha implements latency.Model.
func (m *Model) Alpha() latency.Alpha { return m.C.Alpha }

// Name implements latency.Model.
func (m *Model) Name() string { return m.label }

// DecodeRamp implements latency.Leaper. In a decode-only batch of a fixed
// size only the context features (decode_ctx and the roofline's) change;
// the ramp evaluates those alone and sums every term in StepTime's order.
// With a negative coefficient on one of them the step time could fall as
// the context grows: no ramp then (such a model is stepped).
func (m *Model) DecodeRamp(seqs int) latency.Ramp {
	if seqs <= 0 {
		return nil
	}
	const (
		fixed = iota
		ctxF
		computeF
		memoryF
		roofF
	)
	b := latency.Batch{DecodeSeqs: seqs}
	vals := m.ev.Features(&b, nil) // at ctx 0; the context features are replaced per call
	kind := make([]uint8, len(vals))
	roof := false
	for i, id := range m.ev.ids {
		switch FeatureDoc[id].Name {
		case DecodeCtx:
			kind[i] = ctxF
		case RoofCompute:
			kind[i], roof = computeF, true
		case RoofMemory:
			kind[i], roof = memoryF, true
		case Roof:
			kind[i], roof = roofF, true
		default:
			continue
		}
		if !(m.beta[i] >= 0) {
			return nil
		}
	}
	var cost roofline.DecodeCost
	if roof {
		cost = m.ev.roof.DecodeCost(seqs)
	}
	beta := m.beta
	return func(ctx int64) int64 {
		var compute, memory, total float64
		if roof {
			compute, memory, total = cost.At(ctx)
		}
		var s float64
		for i, v := range vals {
			switch kind[i] {
			case ctxF:
				v = float64(ctx)
			case computeF:
				v = compute
			case memoryF:
				v = memory
			case roofF:
				v = total
			}
			s += beta[i] * v
		}
		if !(s < maxStepUS) {
			return maxStepUS
		}
		us := int64(s + 0.5)
		if us < 1 {
			return 1
		}
		return us
	}
}
