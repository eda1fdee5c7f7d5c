// Package resolve turns the simulator's latency flags (--latency, --model,
// --gpu, --tp, --weight-dtype, --kv-dtype, --coefficients) into a
// latency.Model and says in one line which model it chose and why.
package resolve

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/roofline"
)

// Modes.
const (
	Auto     = "auto"
	Roofline = "roofline"
	Fitted   = "fitted"
)

// EnvDir names a directory searched instead of the embedded coefficients.
const EnvDir = "BLIS_COEFFICIENTS"

// Spec is what the user asked for. Mode "" means auto.
type Spec struct {
	Mode, Model, GPU string
	TP               int
	WeightDtype      string // "" = from config.json
	KVDtype          string // "" = activation dtype of config.json
	CoefficientsFile string // explicit file; implies fitted
	Engine, Version  string // optional: narrow the coefficients lookup
}

// Resolved is the chosen model plus what the engine needs for memory.
type Resolved struct {
	Model    latency.Model
	Why      string // one line for stderr
	Roofline *roofline.Roofline
	Coeffs   *fitted.Coefficients // nil for the roofline
	Path     string               // coefficients file used, if any
}

// KVCapacityTokens is the KV cache tokens one replica (all TP ranks) holds
// under the engine's batch limits (they size vLLM's profiling run).
func (r *Resolved) KVCapacityTokens(gpuMemoryUtilization float64, lim roofline.EngineLimits) (int64, error) {
	return r.Roofline.KVCapacityTokens(gpuMemoryUtilization, lim)
}

// UserEnvDir names the user's coefficients directory. blis-calibrate writes
// a fit there instead of over a shipped file, and auto looks there first.
const UserEnvDir = "BLIS_USER_COEFFICIENTS"

// UserDir is the user's coefficients directory: $BLIS_USER_COEFFICIENTS,
// else <user config dir>/blis/coefficients (~/.config/blis/coefficients on
// Linux); "" when neither can be determined.
func UserDir() string {
	if d := os.Getenv(UserEnvDir); d != "" {
		return d
	}
	if c, err := os.UserConfigDir(); err == nil && c != "" {
		return filepath.Join(c, "blis", "coefficients")
	}
	return ""
}

// searchDir is one place auto and fitted look for coefficients.
type searchDir struct {
	fsys    fs.FS
	where   string // for messages
	shipped bool   // the files compiled into the binary
}

// coefficientsDirs lists where auto/fitted look, first match wins:
// $BLIS_COEFFICIENTS alone when set (a tree replacing the shipped files, as
// scripts and tests use), else the user's directory, then the shipped files.
// The user's files win because they describe the user's own deployment;
// the line on stderr names the shipped file they shadow. Tests replace it.
var coefficientsDirs = func() []searchDir {
	if d := os.Getenv(EnvDir); d != "" {
		return []searchDir{{os.DirFS(d), d, false}}
	}
	var out []searchDir
	if u := UserDir(); u != "" {
		if st, err := os.Stat(u); err == nil && st.IsDir() {
			out = append(out, searchDir{os.DirFS(u), u, false})
		}
	}
	return append(out, searchDir{coefficients.FS, "coefficients", true})
}

// Resolve builds the latency model for s.
func Resolve(s Spec) (*Resolved, error) {
	mode := strings.ToLower(strings.TrimSpace(s.Mode))
	if mode == "" {
		mode = Auto
	}
	if mode != Auto && mode != Roofline && mode != Fitted {
		return nil, fmt.Errorf("--latency: expected auto, roofline or fitted, found %q", s.Mode)
	}
	if s.CoefficientsFile != "" && mode == Roofline {
		return nil, fmt.Errorf("--coefficients %s given with --latency roofline: pick one", s.CoefficientsFile)
	}
	var explicit *fitted.Coefficients
	if s.CoefficientsFile != "" {
		c, err := fitted.Load(s.CoefficientsFile)
		if err != nil {
			return nil, fmt.Errorf("--coefficients: %w", err)
		}
		explicit = c
		if s.Model == "" {
			s.Model = c.Model
		}
		if s.GPU == "" {
			s.GPU = c.GPU
		}
		if s.TP == 0 {
			s.TP = c.TP
		}
	}
	if s.TP == 0 {
		s.TP = 1
	}
	if s.Model == "" {
		return nil, fmt.Errorf("--model: expected a catalogue name (%s) or a config.json path, found nothing", strings.Join(roofline.ModelNames(), ", "))
	}
	if s.GPU == "" {
		return nil, fmt.Errorf("--gpu: expected a GPU name (%s) or a GPU .yaml file, found nothing", strings.Join(roofline.GPUNames(), ", "))
	}
	arch, err := roofline.LoadModel(s.Model)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	if s.WeightDtype != "" {
		d, err := roofline.ParseDtype(s.WeightDtype)
		if err != nil {
			return nil, fmt.Errorf("--weight-dtype: %w", err)
		}
		arch.SetWeightDtype(d)
	}
	if s.KVDtype != "" && s.KVDtype != "auto" {
		d, err := roofline.ParseDtype(s.KVDtype)
		if err != nil {
			return nil, fmt.Errorf("--kv-dtype: %w", err)
		}
		arch.KVDtype = d
	}
	gpu, err := roofline.LoadGPU(s.GPU)
	if err != nil {
		return nil, fmt.Errorf("--gpu: %w", err)
	}
	rf, err := roofline.New(arch, gpu, s.TP)
	if err != nil {
		return nil, fmt.Errorf("--tp: %w", err)
	}
	out := &Resolved{Roofline: rf}
	useFitted := func(c *fitted.Coefficients, p string) error {
		if c.TP != s.TP {
			return fmt.Errorf("%s: coefficients are for tp %d, deployment has tp %d", p, c.TP, s.TP)
		}
		m, err := fitted.NewModel(c, rf, p)
		if err != nil {
			return err
		}
		out.Model, out.Coeffs, out.Path = m, c, p
		out.Why = fmt.Sprintf("latency: fitted coefficients %s (%s)", p, errText(c))
		return nil
	}
	if explicit != nil {
		if err := sameDeployment(explicit, s.CoefficientsFile, s.Model, arch, gpu); err != nil {
			return nil, fmt.Errorf("--coefficients: %w", err)
		}
		if err := useFitted(explicit, s.CoefficientsFile); err != nil {
			return nil, fmt.Errorf("--coefficients: %w", err)
		}
		return out, nil
	}
	desc := fmt.Sprintf("%s on %s tp%d", arch.Name, gpu.Name, s.TP)
	if s.WeightDtype != "" {
		desc += " " + string(arch.WeightDtype)
	}
	if mode != Roofline {
		// The simulator models vLLM's engine: without an engine asked
		// for, only vLLM fits are candidates (a fit of another stack's
		// steps, Splitwise's 2023 static batches say, would time vLLM's
		// continuous batching wrongly); --coefficients takes any file.
		engine := s.Engine
		if engine == "" {
			engine = "vllm"
		}
		q := fitted.Query{Model: s.Model, GPU: gpu.Name, TP: s.TP, Engine: engine, Version: s.Version, WeightDtype: string(arch.WeightDtype)}
		dirs := coefficientsDirs()
		for i, d := range dirs {
			p, c, err := fitted.Find(d.fsys, q)
			if err != nil {
				return nil, fmt.Errorf("coefficients in %s: %w", d.where, err)
			}
			if c == nil {
				continue
			}
			if err := useFitted(c, d.where+"/"+p); err != nil {
				return nil, err
			}
			for _, later := range dirs[i+1:] {
				if p2, c2, err := fitted.Find(later.fsys, q); err == nil && c2 != nil && later.shipped {
					out.Why = strings.TrimSuffix(out.Why, ")") + fmt.Sprintf("; shadows the shipped %s/%s, %s)", later.where, p2, errText(c2))
				}
			}
			if d.shipped {
				out.withKnownError(gpu.Name)
			}
			return out, nil
		}
		// Say so when coefficients exist for another weight dtype or
		// another engine only.
		other := ""
		for _, d := range dirs {
			anyDtype := q
			anyDtype.WeightDtype = ""
			if p2, c2, err := fitted.Find(d.fsys, anyDtype); err == nil && c2 != nil {
				other = fmt.Sprintf("; %s/%s is for weight dtype %s", d.where, p2, c2.WeightDtype)
				break
			}
			if s.Engine == "" {
				anyEngine := q
				anyEngine.Engine, anyEngine.Version = "", ""
				if p2, c2, err := fitted.Find(d.fsys, anyEngine); err == nil && c2 != nil {
					other = fmt.Sprintf("; %s/%s is a fit of engine %s, not vLLM's (pass --coefficients to use it)", d.where, p2, c2.Engine)
					break
				}
			}
		}
		if mode == Fitted {
			var in []string
			for _, d := range dirs {
				in = append(in, d.where+"/"+roofline.ModelKey(s.Model)+"/")
			}
			return nil, fmt.Errorf("--latency fitted: no coefficients for %s in %s%s (run blis-calibrate, pass --coefficients FILE, or use --latency roofline)", desc, strings.Join(in, " or "), other)
		}
		out.Model = rf
		out.Why = fmt.Sprintf("latency: roofline (no coefficients for %s%s)%s", desc, other, alphaNote(rf))
		return out.withKnownError(gpu.Name), nil
	}
	out.Model = rf
	out.Why = fmt.Sprintf("latency: roofline for %s (--latency roofline)%s", desc, alphaNote(rf))
	return out.withKnownError(gpu.Name), nil
}

// alphaNote says what the roofline charges outside the GPU step.
func alphaNote(rf *roofline.Roofline) string {
	a := rf.Alpha()
	s := fmt.Sprintf("; first-token path outside the GPU step α0 %.1f ms (vLLM's default", a.QueueBase/1e3)
	if a.QueuePerInputToken > 0 {
		s += fmt.Sprintf(", + %g µs per prompt token", a.QueuePerInputToken)
	}
	return s + "; latency.alpha sets a measured one)"
}

// withKnownError adds to Why how wrong the chosen model was on real vLLM
// runs of the GPU's family (bench/fidelity's pooled table, issue 16): the
// roofline's, or the shipped coefficients files' on points they were not
// fitted on. A user's own file has only its own test error.
func (r *Resolved) withKnownError(gpu string) *Resolved {
	model := "roofline"
	if r.Coeffs != nil {
		model = "fitted"
	}
	r.Why += "; " + latency.DescribeKnownError(model, latency.GPUFamily(gpu))
	return r
}

// sameDeployment refuses coefficients fitted for another catalogued model
// or GPU: their roofline features and constant would silently time a
// different deployment. A model given as a config.json path cannot be
// matched by name and is accepted.
func sameDeployment(c *fitted.Coefficients, p, model string, arch *roofline.Arch, gpu roofline.GPU) error {
	if cm, ok := roofline.LookupModel(c.Model); ok {
		if _, ok := roofline.LookupModel(model); ok && cm.ShortName() != arch.Name {
			return fmt.Errorf("%s: field model: coefficients are for %s, deployment runs %s (pass --model %s, or refit with blis-calibrate)", p, cm.ShortName(), arch.Name, cm.ShortName())
		}
	}
	want := c.GPU
	if g, ok := roofline.LookupGPU(c.GPU); ok {
		want = g.Name
	}
	if !strings.EqualFold(want, gpu.Name) {
		return fmt.Errorf("%s: field gpu: coefficients are for %s, deployment is on %s (pass --gpu %s, or refit with blis-calibrate)", p, want, gpu.Name, want)
	}
	return nil
}

func errText(c *fitted.Coefficients) string {
	if c.Fit.TestRows > 0 {
		return fmt.Sprintf("test MAPE %.1f%%", c.Fit.TestMAPE)
	}
	if c.Fit.Method != "" {
		return "fit " + c.Fit.Method + ", no held-out error recorded"
	}
	return "no held-out error recorded"
}
