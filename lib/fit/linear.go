package fit

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
)

// FeatureModel is a latency.Model evaluating Σ values[j]·features[j]. The
// fitter runs the simulator with it; it evaluates the same feature functions
// the shipped model uses, so fitter and simulator agree.
type FeatureModel struct {
	FS     FeatureSet
	Values []float64
	A      latency.Alpha
	Label  string
	buf    []float64
}

// NewFeatureModel copies values so later edits by the optimiser do not leak.
func NewFeatureModel(fs FeatureSet, values []float64, a latency.Alpha, label string) *FeatureModel {
	return &FeatureModel{FS: fs, Values: append([]float64(nil), values...), A: a, Label: label, buf: make([]float64, len(fs.Names))}
}

// StepTime implements latency.Model.
func (m *FeatureModel) StepTime(b *latency.Batch) int64 {
	m.FS.Eval(b, m.buf)
	t := 0.0
	for j, v := range m.Values {
		t += v * m.buf[j]
	}
	if t < 1 {
		return 1
	}
	return int64(t + 0.5)
}

// Alpha implements latency.Model.
func (m *FeatureModel) Alpha() latency.Alpha { return m.A }

// Name implements latency.Model.
func (m *FeatureModel) Name() string {
	if m.Label != "" {
		return m.Label
	}
	parts := make([]string, len(m.Values))
	for j, v := range m.Values {
		parts[j] = fmt.Sprintf("%s=%.4g", m.FS.Names[j], v)
	}
	return "fit:" + strings.Join(parts, ",")
}
