// Package bundle loads policy bundles: one YAML file giving each decision
// point of the simulator (admission, priority, routing, scheduler,
// preemption, autoscaler) as data — a parameterised built-in template, a
// decision tree, or sandboxed Starlark — plus the bundle's identity (id,
// generation, parent_id, mutations) that flows into every output's
// provenance. See docs/policies.md.
//
// The API, for blis-sim and other tools (blis-eval, autoscaling):
//
//	b, err := bundle.Load("bundle.yaml", bundle.Env{})  // every load-time error, file:line
//	b.Provenance()                                      // blis.policy.* provenance keys
//	rt, err := b.Instantiate(&cfg)                      // fresh policies for one run
//	opts.Policies = rt.Policies()
//	... engine.Run(cfg, models, src, sink, opts) ...    // a policy failure is a *RunError
//
// Instantiate reads the config and writes nothing into it: the bundle's
// stages are policies (parameterised stages are the built-in templates with
// the bundle's parameters), its router state (tenants, rates, recent
// latencies) follows finished requests through Policies.OnResult, and its
// autoscaler stage scales every autoscaled pool (Policies.Autoscale).
package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Kinds of stage.
const (
	KindParameterized = "parameterized"
	KindTree          = "decision_tree"
	KindStarlark      = "starlark"
)

// Stage names, in pipeline order.
const (
	StageAdmission  = "admission"
	StagePriority   = "priority"
	StageRouting    = "routing"
	StageScheduler  = "scheduler"
	StagePreemption = "preemption"
	StageAutoscaler = "autoscaler"
)

// StageNames lists the stages a bundle may give.
var StageNames = []string{StageAdmission, StagePriority, StageRouting, StageScheduler, StagePreemption, StageAutoscaler}

// Sandbox bounds every Starlark call.
type Sandbox struct {
	// MaxSteps is the Starlark execution steps one call may take.
	MaxSteps uint64
	// MaxLen bounds the length of any string, list, tuple or dict a policy
	// builds with +, *, % or range, and of the state dict's entries.
	MaxLen int
	// MaxState bounds the values held in the state dict, counted through
	// nested containers (checked every 1024 calls and at the end).
	MaxState int
	// MaxRunSteps bounds the Starlark steps of the whole run, all stages
	// and counterfactual forks together (0: no bound).
	MaxRunSteps uint64
}

// DefaultSandbox is the default bounds: far above what a routing decision
// over hundreds of replicas needs (a least-loaded route over 8 replicas
// takes about 100 steps).
var DefaultSandbox = Sandbox{MaxSteps: 1_000_000, MaxLen: 1 << 20, MaxState: 1 << 20}

// Env is what loading may draw on.
type Env struct {
	// ReadFile reads files the bundle names (default os.ReadFile): tests
	// and fuzzers supply their own.
	ReadFile func(path string) ([]byte, error)
}

// Stage is one decision point of a bundle.
type Stage struct {
	Name string // admission, priority, …
	Kind string // parameterized | decision_tree | starlark
	Line int    // line of the stage's key in the bundle

	// parameterized
	Template string
	Params   policy.Params // resolved: defaults filled, ranges checked

	// decision_tree
	tree *node
	info *treeInfo

	// starlark
	File     string // the source file (resolved path), or the bundle for inline source
	Random   bool   // pass a seeded random stream (random.int(n), random.float())
	MaxSteps uint64
	star     *starProgram

	b *Bundle
}

// Bundle is a loaded policy bundle.
type Bundle struct {
	Path       string
	ID         string
	Generation int64
	ParentID   string
	Mutations  []string
	Sandbox    Sandbox
	// Oracle lets policies read the true output length (oracle: true):
	// information no real router has, recorded in the results' metadata.
	Oracle bool
	// Predictor predicts output lengths for policies (without the oracle).
	Predictor Predictor
	// SHA256 hashes the bundle and every file it names (provenance).
	SHA256 string

	stages map[string]*Stage
}

// Stage returns the named stage, or nil when the bundle leaves it to the
// built-in default.
func (b *Bundle) Stage(name string) *Stage { return b.stages[name] }

// Load reads and checks a bundle: syntax, kinds, templates and their
// parameters, decision trees, Starlark sources and entrypoints. Every error
// names the file and line.
func Load(path string, env Env) (*Bundle, error) {
	read := env.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, env)
}

var lineRE = regexp.MustCompile(`line ([0-9]+): `)

// Parse checks a bundle given its bytes; name is its path (files it names
// are relative to its directory).
func Parse(name string, data []byte, env Env) (*Bundle, error) {
	if env.ReadFile == nil {
		env.ReadFile = os.ReadFile
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(lineRE.ReplaceAllString(err.Error(), "$1: "), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty policy bundle (expected keys id, %s)", name, strings.Join(StageNames, ", "))
	}
	root := doc.Content[0]
	p := &parser{name: name, dir: filepath.Dir(name), env: env}
	h := sha256.New()
	h.Write(data)
	p.hash = func(b []byte) { h.Write(b) }
	b := &Bundle{Path: name, Sandbox: DefaultSandbox, Predictor: Predictor{Kind: PredictNone}, stages: map[string]*Stage{}}
	if err := p.bundle(root, b); err != nil {
		return nil, err
	}
	b.SHA256 = hex.EncodeToString(h.Sum(nil))
	return b, nil
}

type parser struct {
	name, dir string
	env       Env
	hash      func([]byte)
	// noOutput: the bundle has neither a predictor nor the oracle, so a
	// tree may not read request.output_tokens.
	noOutput bool
}

func (p *parser) errf(n *yaml.Node, key, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", p.name, n.Line, key, fmt.Sprintf(format, args...))
}

// mapping checks n is a mapping with only the known keys (in order) and
// returns its values by key.
func (p *parser) mapping(n *yaml.Node, path string, known []string) (map[string]*yaml.Node, map[string]*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		return nil, nil, p.errf(n, path, "aliases are not supported")
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil, p.errf(n, path, "expected a mapping, found %s", describe(n))
	}
	vals, keys := map[string]*yaml.Node{}, map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, nil, p.errf(k, path, "expected a key, found %s", describe(k))
		}
		ok := false
		for _, x := range known {
			if x == k.Value {
				ok = true
			}
		}
		if !ok {
			return nil, nil, p.errf(k, join(path, k.Value), "unknown key (expected %s)", strings.Join(known, ", "))
		}
		if _, dup := vals[k.Value]; dup {
			return nil, nil, p.errf(k, join(path, k.Value), "given twice")
		}
		vals[k.Value], keys[k.Value] = v, k
	}
	return vals, keys, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return strconv.Quote(n.Value)
}

func (p *parser) str(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, path, "expected a string, found %s", describe(n))
	}
	return n.Value, nil
}

func (p *parser) num(n *yaml.Node, path string) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		return 0, p.errf(n, path, "expected a number, found %s", describe(n))
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, p.errf(n, path, "expected a finite number, found %s", describe(n))
	}
	return v, nil
}

func (p *parser) integer(n *yaml.Node, path string, lo, hi int64) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, p.errf(n, path, "expected an integer, found %s", describe(n))
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v < lo || v > hi {
		return 0, p.errf(n, path, "expected an integer in [%d, %d], found %s", lo, hi, describe(n))
	}
	return v, nil
}

func (p *parser) boolean(n *yaml.Node, path string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, p.errf(n, path, "expected true or false, found %s", describe(n))
	}
	return n.Value == "true", nil
}

func (p *parser) bundle(root *yaml.Node, b *Bundle) error {
	known := append([]string{"id", "generation", "parent_id", "mutations", "sandbox", "oracle", "predictor"}, StageNames...)
	vals, keys, err := p.mapping(root, "", known)
	if err != nil {
		return err
	}
	if v := vals["id"]; v != nil {
		if b.ID, err = p.str(v, "id"); err != nil {
			return err
		}
	}
	if v := vals["parent_id"]; v != nil {
		if b.ParentID, err = p.str(v, "parent_id"); err != nil {
			return err
		}
	}
	if v := vals["generation"]; v != nil {
		if b.Generation, err = p.integer(v, "generation", 0, math.MaxInt64); err != nil {
			return err
		}
	}
	if v := vals["mutations"]; v != nil {
		if v.Kind != yaml.SequenceNode {
			return p.errf(v, "mutations", "expected a list of strings, found %s", describe(v))
		}
		b.Mutations = []string{}
		for i, e := range v.Content {
			s, err := p.str(e, fmt.Sprintf("mutations[%d]", i))
			if err != nil {
				return err
			}
			b.Mutations = append(b.Mutations, s)
		}
	}
	if v := vals["sandbox"]; v != nil {
		sv, _, err := p.mapping(v, "sandbox", []string{"max_steps", "max_len", "max_state", "max_run_steps"})
		if err != nil {
			return err
		}
		if n := sv["max_steps"]; n != nil {
			x, err := p.integer(n, "sandbox.max_steps", 1, 1<<40)
			if err != nil {
				return err
			}
			b.Sandbox.MaxSteps = uint64(x)
		}
		if n := sv["max_run_steps"]; n != nil {
			x, err := p.integer(n, "sandbox.max_run_steps", 0, 1<<50) // 0: none, as absent
			if err != nil {
				return err
			}
			b.Sandbox.MaxRunSteps = uint64(x)
		}
		if n := sv["max_len"]; n != nil {
			x, err := p.integer(n, "sandbox.max_len", 1, 1<<28)
			if err != nil {
				return err
			}
			b.Sandbox.MaxLen = int(x)
		}
		if n := sv["max_state"]; n != nil {
			x, err := p.integer(n, "sandbox.max_state", 1, 1<<28)
			if err != nil {
				return err
			}
			b.Sandbox.MaxState = int(x)
		}
	}
	if v := vals["oracle"]; v != nil {
		if b.Oracle, err = p.boolean(v, "oracle"); err != nil {
			return err
		}
	}
	if v := vals["predictor"]; v != nil {
		if err := p.predictor(v, b); err != nil {
			return err
		}
	}
	p.noOutput = !b.Oracle && b.Predictor.Kind == PredictNone
	for _, name := range StageNames {
		v := vals[name]
		if v == nil {
			continue
		}
		st, err := p.stage(v, keys[name], name, b)
		if err != nil {
			return err
		}
		b.stages[name] = st
	}
	return nil
}

// predictor reads predictor: {kind: none|class|noisy, error: σ, prior: tokens}.
func (p *parser) predictor(n *yaml.Node, b *Bundle) error {
	vals, _, err := p.mapping(n, "predictor", []string{"kind", "error", "prior"})
	if err != nil {
		return err
	}
	kn := vals["kind"]
	if kn == nil {
		return p.errf(n, "predictor", "missing kind (expected %s)", strings.Join(PredictorKinds, ", "))
	}
	pr := Predictor{}
	if pr.Kind, err = p.str(kn, "predictor.kind"); err != nil {
		return err
	}
	switch pr.Kind {
	case PredictNone, PredictClass, PredictNoisy:
	default:
		return p.errf(kn, "predictor.kind", "expected %s, found %q", strings.Join(PredictorKinds, ", "), pr.Kind)
	}
	if e := vals["error"]; e != nil {
		if pr.Kind != PredictNoisy {
			return p.errf(e, "predictor.error", "only with kind: noisy")
		}
		if pr.Error, err = p.num(e, "predictor.error"); err != nil {
			return err
		}
		if pr.Error < 0 || pr.Error > 10 {
			return p.errf(e, "predictor.error", "expected a σ in [0, 10] (the log of the relative error), found %g", pr.Error)
		}
	} else if pr.Kind == PredictNoisy {
		return p.errf(n, "predictor", "kind noisy needs error (σ of the log of the relative error, e.g. 0.5)")
	}
	if v := vals["prior"]; v != nil {
		if pr.Kind != PredictClass {
			return p.errf(v, "predictor.prior", "only with kind: class")
		}
		if pr.Prior, err = p.num(v, "predictor.prior"); err != nil {
			return err
		}
		if pr.Prior < 0 {
			return p.errf(v, "predictor.prior", "expected tokens >= 0, found %g", pr.Prior)
		}
	}
	b.Predictor = pr
	return nil
}

func (p *parser) stage(n, key *yaml.Node, name string, b *Bundle) (*Stage, error) {
	st := &Stage{Name: name, Line: key.Line, b: b, MaxSteps: b.Sandbox.MaxSteps}
	vals, _, err := p.mapping(n, name, []string{"kind", "template", "params", "tree", "file", "source", "random", "max_steps"})
	if err != nil {
		return nil, err
	}
	kn := vals["kind"]
	if kn == nil {
		return nil, p.errf(n, name, "missing kind (expected %s, %s or %s)", KindParameterized, KindTree, KindStarlark)
	}
	if st.Kind, err = p.str(kn, name+".kind"); err != nil {
		return nil, err
	}
	allowed := map[string][]string{
		KindParameterized: {"kind", "template", "params"},
		KindTree:          {"kind", "tree"},
		KindStarlark:      {"kind", "file", "source", "random", "max_steps"},
	}[st.Kind]
	if allowed == nil {
		return nil, p.errf(kn, name+".kind", "expected %s, %s or %s, found %q", KindParameterized, KindTree, KindStarlark, st.Kind)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return nil, p.errf(n.Content[i], name+"."+k, "not a key of a %s stage (expected %s)", st.Kind, strings.Join(allowed, ", "))
		}
	}
	switch st.Kind {
	case KindParameterized:
		tn := vals["template"]
		if tn == nil {
			return nil, p.errf(n, name, "missing template (expected one of %s)", strings.Join(templateNames(name), ", "))
		}
		if st.Template, err = p.str(tn, name+".template"); err != nil {
			return nil, err
		}
		t, err := findTemplate(name, st.Template)
		if err != nil {
			return nil, p.errf(tn, name+".template", "%v", err)
		}
		raw := policy.Params{}
		pn := vals["params"]
		if pn != nil {
			pv, _, err := p.mapping(pn, name+".params", paramNames(t))
			if err != nil {
				return nil, err
			}
			for i := 0; i+1 < len(pn.Content); i += 2 {
				k := pn.Content[i].Value
				x, err := p.num(pv[k], name+".params."+k)
				if err != nil {
					return nil, err
				}
				raw[k] = x
			}
		}
		if st.Params, err = t.Resolve(raw); err != nil {
			at := tn
			if pn != nil {
				at = pn
			}
			return nil, p.errf(at, name+".params", "%v", err)
		}
	case KindTree:
		tn := vals["tree"]
		if tn == nil {
			return nil, p.errf(n, name, "missing tree")
		}
		if st.tree, st.info, err = p.tree(tn, name+".tree", name); err != nil {
			return nil, err
		}
	case KindStarlark:
		if v := vals["random"]; v != nil {
			if st.Random, err = p.boolean(v, name+".random"); err != nil {
				return nil, err
			}
		}
		if v := vals["max_steps"]; v != nil {
			x, err := p.integer(v, name+".max_steps", 1, 1<<40)
			if err != nil {
				return nil, err
			}
			st.MaxSteps = uint64(x)
		}
		fn, sn := vals["file"], vals["source"]
		var src []byte
		line := 0
		switch {
		case fn != nil && sn != nil:
			return nil, p.errf(sn, name+".source", "give file or source, not both")
		case fn != nil:
			f, err := p.str(fn, name+".file")
			if err != nil {
				return nil, err
			}
			if !filepath.IsAbs(f) {
				f = filepath.Join(p.dir, f)
			}
			st.File = f
			if src, err = p.env.ReadFile(f); err != nil {
				return nil, p.errf(fn, name+".file", "%v", err)
			}
			p.hash(src)
		case sn != nil:
			s, err := p.str(sn, name+".source")
			if err != nil {
				return nil, err
			}
			st.File = p.name
			src = []byte(s)
			// Literal and folded blocks start on the line after the key:
			// pad so that Starlark's line numbers are the bundle's.
			if sn.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				line = sn.Line
			} else {
				line = sn.Line - 1
			}
		default:
			return nil, p.errf(n, name, "missing file or source")
		}
		if st.star, err = compileStar(st, src, line); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Provenance is what a table's metadata records of the bundle, in order:
// blis.policy.stages (what each given stage is, which summaries and reports
// show: trace.Meta.PolicyLabel), .id, .generation, .parent_id, .mutations
// (a JSON list), .path, .sha256, .oracle (true or false) and .predictor (the
// driver writes them: lib/sim.AnnotatePolicy).
func (b *Bundle) Provenance() [][2]string {
	mu := b.Mutations
	if mu == nil {
		mu = []string{}
	}
	j, _ := json.Marshal(mu)
	return [][2]string{
		{row.MetaPolicyStages, strings.Join(b.stageList(), row.PolicyStageSep)},
		{row.MetaPolicyID, b.ID},
		{row.MetaPolicyGeneration, strconv.FormatInt(b.Generation, 10)},
		{"blis.policy.parent_id", b.ParentID},
		{"blis.policy.mutations", string(j)},
		{"blis.policy.path", b.Path},
		{"blis.policy.sha256", b.SHA256},
		{MetaOracle, strconv.FormatBool(b.Oracle)},
		{MetaPredictor, b.Predictor.String()},
		{row.MetaPolicyStageKinds, b.stageKinds()},
	}
}

// stageKinds is a JSON object of the stages the bundle gives and their
// kinds ({"routing": "starlark", "priority": "decision_tree"}): what the
// summary's advice must not contradict.
func (b *Bundle) stageKinds() string {
	m := map[string]string{}
	for name, st := range b.stages {
		k := st.Kind
		if k == KindParameterized {
			k += " " + st.Template
		}
		m[name] = k
	}
	j, _ := json.Marshal(m) // sorted keys
	return string(j)
}

// Metadata keys of what the bundle's policies could see of output
// lengths (blis-report warns of the oracle).
const (
	MetaOracle    = "blis.policy.oracle"
	MetaPredictor = "blis.policy.predictor"
)

// RunError is a policy failure while simulating: which policy file and
// line, which stage, which request. It is bad input (exit 2).
type RunError struct {
	File    string
	Line    int
	Stage   string
	Request string // request id ("" when the decision is not about one)
	Err     error
}

func (e *RunError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	req := ""
	if e.Request != "" {
		req = ", request " + e.Request
	}
	return fmt.Sprintf("%s: %s policy%s: %v", where, e.Stage, req, e.Err)
}

func (e *RunError) Unwrap() error { return e.Err }

// BadInput marks a policy failure as the user's input (exit status 2).
func (e *RunError) BadInput() bool { return true }

// Describe is a one-line account of the bundle for run summaries: its id
// and how each stage it gives is decided.
func (b *Bundle) Describe() string {
	parts := b.stageList()
	id := b.ID
	if id == "" {
		id = "(no id)"
	}
	if len(parts) == 0 {
		parts = []string{"no stages"}
	}
	see := "output lengths predicted: " + b.Predictor.String()
	if b.Oracle {
		see = "ORACLE: policies read the true output lengths"
	}
	return fmt.Sprintf("policy %s generation %d from %s: %s (other stages built in; %s)", id, b.Generation, b.Path, strings.Join(parts, ", "), see)
}

// stageList describes each stage the bundle gives, in pipeline order:
// "routing starlark prefix-load.star", "admission queue-limit",
// "priority decision tree".
func (b *Bundle) stageList() []string {
	var parts []string
	for _, name := range StageNames {
		st := b.stages[name]
		if st == nil {
			continue
		}
		switch st.Kind {
		case KindParameterized:
			parts = append(parts, name+" "+st.Template)
		case KindTree:
			parts = append(parts, name+" decision tree")
		case KindStarlark:
			parts = append(parts, name+" starlark "+filepath.Base(st.File))
		}
	}
	return parts
}
