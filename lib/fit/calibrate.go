package fit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/blis-sim/blis/lib/engine"
	"io"
	"math"
	"os"
	"strings"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/roofline"
)

// Deployment is what the coefficients describe.
type Deployment struct {
	Model, GPU          string
	TP                  int
	WeightDtype         string
	KVDtype             string
	Engine, Version     string
	MaxNumSeqs          int   // 0: vllm serve's default for the GPU (config.ServeLimits); a serving point's own (PointEngine)
	MaxNumBatchedTokens int   // 0: vllm serve's default for the GPU; a serving point's own (PointEngine)
	KVBlocks            int64 // 0: from GPU memory via the roofline
	BlockSize           int   // 0: 16
	GPUMemUtil          float64
	PrefixCaching       bool
	// AsyncScheduling: "on" or "off" as a recorded run says, or "" for the
	// engine version's default (vLLM schedules asynchronously by default
	// from 0.14 on).
	AsyncScheduling string
}

// asyncScheduling is whether the deployment's engine schedules one step
// ahead (vLLM's async scheduling).
func (d *Deployment) asyncScheduling() bool {
	switch d.AsyncScheduling {
	case "on":
		return true
	case "off":
		return false
	}
	return VLLMAsyncByDefault(d.Engine, d.Version)
}

// VLLMAsyncByDefault reports whether an engine version schedules
// asynchronously unless told otherwise: vLLM from 0.14.0 (its release notes:
// "Async scheduling is now enabled by default", PR 27614) and its nightly
// builds; older and unknown versions do not.
func VLLMAsyncByDefault(engine, version string) bool {
	if !strings.EqualFold(engine, "vllm") {
		return false
	}
	if strings.HasPrefix(version, "nightly") {
		return true
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 0 || minor >= 14
}

// Setup is the roofline and engine configuration of a deployment.
type Setup struct {
	Dep      Deployment
	Resolved *resolve.Resolved // roofline (for roofline features and the warm start)
	Engine   config.Cluster
	PerChain int // closed-loop requests per chain (0: ChainLength)
}

// BenchmarkLimits returns the engine limits a closed-loop serving point of
// aiconfigurator's silicon data was measured with. Its launch rule for an
// aggregated benchmark (ai-dynamo/aiconfigurator,
// generator/rule_plugin/benchmark/vllm.rule; TensorRT-LLM's is the same up
// to block rounding) sets max_num_seqs to the concurrency and
// max_num_batched_tokens to concurrency + ISL + 1500: a step holds one
// prompt and part of the next, so C simultaneous prompts are prefilled a
// step or two at a time, not eight to a step as under vLLM's 8,192 default.
func BenchmarkLimits(p measure.ServingPoint) (maxSeqs, maxBatchedTokens int) {
	return p.Concurrency, p.Concurrency + p.InputTokens + 1500
}

// PointEngine is the engine a closed-loop point is simulated on: the
// setup's, with BenchmarkLimits for each limit the deployment leaves unset
// (a limit given on the command line wins).
func (s *Setup) PointEngine(p measure.ServingPoint) config.Cluster {
	cfg := s.Engine
	seqs, tokens := BenchmarkLimits(p)
	if s.Dep.MaxNumSeqs == 0 && seqs > 0 {
		cfg.Engine.MaxNumSeqs = seqs
	}
	if s.Dep.MaxNumBatchedTokens == 0 && tokens > 0 {
		cfg.Engine.MaxNumBatchedTokens = tokens
	}
	capSeqs(&cfg.Engine)
	return cfg
}

// capSeqs keeps max_num_seqs within the token budget: each running request
// takes at least one token of a step.
func capSeqs(e *config.Engine) {
	if e.MaxNumBatchedTokens != 0 && e.MaxNumBatchedTokens < e.MaxNumSeqs {
		e.MaxNumSeqs = e.MaxNumBatchedTokens
	}
}

// NewSetup resolves the roofline of dep and an engine config with one
// replica; KV blocks come from GPU memory unless dep gives them.
func NewSetup(dep Deployment) (*Setup, error) {
	if dep.TP == 0 {
		dep.TP = 1
	}
	r, err := resolve.Resolve(resolve.Spec{Mode: resolve.Roofline, Model: dep.Model, GPU: dep.GPU, TP: dep.TP, WeightDtype: dep.WeightDtype, KVDtype: dep.KVDtype})
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.Model, cfg.GPU, cfg.TP, cfg.Replicas = dep.Model, dep.GPU, dep.TP, 1
	cfg.WeightDtype, cfg.KVDtype = dep.WeightDtype, dep.KVDtype
	if dep.MaxNumSeqs > 0 { // else vllm serve's for the GPU (config.ServeLimits, filled by Validate)
		cfg.Engine.MaxNumSeqs = dep.MaxNumSeqs
	}
	if dep.MaxNumBatchedTokens > 0 {
		cfg.Engine.MaxNumBatchedTokens = dep.MaxNumBatchedTokens
	}
	capSeqs(&cfg.Engine)
	if dep.BlockSize > 0 {
		cfg.Engine.BlockSize = dep.BlockSize
	}
	if dep.GPUMemUtil > 0 {
		cfg.Engine.GPUMemoryUtilization = dep.GPUMemUtil
	}
	cfg.Engine.PrefixCaching = dep.PrefixCaching
	cfg.Engine.AsyncScheduling = dep.asyncScheduling()
	cfg.Engine.KVBlocks = dep.KVBlocks
	cfg.Engine.KVLayout = r.Roofline.A.KVLayout()
	if cfg.Engine.KVBlocks == 0 {
		d := cfg.Resolved()[0]
		b, _, err := engine.KVBlocksFromMemory(&d, r)
		if err != nil {
			return nil, fmt.Errorf("KV cache of %s on %s tp%d: %w (pass --kv-blocks)", dep.Model, dep.GPU, dep.TP, err)
		}
		cfg.Engine.KVBlocks, cfg.Engine.MaxNumSeqs, cfg.Engine.MaxNumBatchedTokens = b, d.Engine.MaxNumSeqs, d.Engine.MaxNumBatchedTokens
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Setup{Dep: dep, Resolved: r, Engine: cfg}, nil
}

// FeatureNames expands a feature-set name (plain, tokens, roofline,
// roofline-scale) or a comma-separated list of lib/latency/fitted features.
func FeatureNames(set string, tp int) ([]string, error) {
	switch set {
	case "plain":
		return []string{fitted.Const, fitted.PrefillTokens, fitted.DecodeTokens}, nil
	case "tokens":
		return []string{fitted.Const, fitted.PrefillTokens, fitted.PrefillAttn, fitted.DecodeTokens, fitted.DecodeCtx}, nil
	case "roofline", "":
		n := []string{fitted.Const, fitted.RoofCompute, fitted.RoofMemory}
		if tp > 1 {
			n = append(n, fitted.RoofComm)
		}
		return append(n, fitted.BatchSize), nil
	case "roofline-scale":
		return []string{fitted.Const, fitted.Roof, fitted.BatchSize}, nil
	}
	names := strings.Split(set, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if _, err := fitted.NewEvaluator(names, nil); err != nil && !strings.Contains(err.Error(), "needs the model") {
		return nil, fmt.Errorf("--features: %w (or one of plain, tokens, roofline, roofline-scale)", err)
	}
	return names, nil
}

// Features builds the FeatureSet for names, bound to the setup's roofline.
func (s *Setup) Features(names []string) (FeatureSet, error) {
	var rf *roofline.Roofline
	if s != nil && s.Resolved != nil {
		rf = s.Resolved.Roofline
	}
	ev, err := fitted.NewEvaluator(names, rf)
	if err != nil {
		return FeatureSet{}, err
	}
	return FromFeaturizer(ev), nil
}

// RooflinePrior fits fs to the roofline's step times over the batches this
// engine produces for inputs up to maxIn and outputs up to maxOut.
func (s *Setup) RooflinePrior(fs FeatureSet, maxIn, maxOut int) ([]float64, error) {
	return PriorFromModel(s.Resolved.Roofline, fs, PriorBatches(PriorShape{
		MaxBatchedTokens: s.Engine.Engine.MaxNumBatchedTokens, MaxSeqs: s.Engine.Engine.MaxNumSeqs,
		MaxInput: maxIn, MaxOutput: maxOut}))
}

// Coefficients packs a fit into the coefficients file format.
func (s *Setup) Coefficients(names []string, values []float64, a latency.Alpha) *fitted.Coefficients {
	c := &fitted.Coefficients{Model: s.Resolved.Roofline.A.Name, GPU: s.Resolved.Roofline.G.Name, TP: s.Dep.TP,
		Engine: s.Dep.Engine, Version: s.Dep.Version, WeightDtype: s.Dep.WeightDtype, KVDtype: s.Dep.KVDtype, Alpha: roundAlpha(a)}
	if c.Model == "" {
		c.Model = s.Dep.Model
	}
	if c.Engine == "" {
		c.Engine = "vllm"
	}
	if c.Version == "" {
		c.Version = "unknown"
	}
	for j, n := range names {
		c.Terms = append(c.Terms, fitted.Term{Feature: n, Value: round6(values[j])})
		if strings.HasPrefix(n, "roofline") && c.RooflineEfficiency == nil {
			// The roofline_* features were these µs: pin the profile, so a
			// later change of the built-in one does not move the fit.
			e := s.Resolved.Roofline.G.Eff
			c.RooflineEfficiency = &e
		}
	}
	return c
}

// round6 keeps 6 significant digits so files are readable and stable.
func round6(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	e := math.Pow(10, 5-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}

func roundAlpha(a latency.Alpha) latency.Alpha {
	return latency.Alpha{QueueBase: round6(a.QueueBase), QueuePerInputToken: round6(a.QueuePerInputToken), PerOutputToken: round6(a.PerOutputToken)}
}

// FileSource records an input file with its digest.
func FileSource(path, display string, rows int, filter string) (fitted.Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return fitted.Source{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fitted.Source{}, err
	}
	if display == "" {
		display = path
	}
	return fitted.Source{Path: display, SHA256: hex.EncodeToString(h.Sum(nil)), Rows: rows, Filter: filter}, nil
}
