package config

import (
	"errors"
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"
)

// Speculative is a deployment's speculative decoding (docs/latency.md,
// "Speculative decoding"), in vLLM's --speculative-config terms. Absent:
// one token per decode step.
type Speculative struct {
	// Method is the proposer: draft_model (a smaller model of the same
	// tokenizer), eagle or eagle3 (a one-layer head over the target's
	// hidden states), ngram (prompt lookup on the CPU).
	Method string `yaml:"method"`
	// Model is draft_model's draft model (catalogue name, HuggingFace id
	// or config.json path), run at the deployment's tp on its GPU.
	Model string `yaml:"model,omitempty"`
	// NumSpeculativeTokens is k, the drafts per request per step.
	NumSpeculativeTokens int `yaml:"num_speculative_tokens"`
	// AcceptanceRate is α, the probability that a draft is accepted given
	// the ones before it were; AcceptanceByClass overrides it per
	// slo_class (a code class accepts more than a chat one).
	AcceptanceRate    float64            `yaml:"acceptance_rate"`
	AcceptanceByClass map[string]float64 `yaml:"acceptance_by_class,omitempty"`
	// DisableByBatchSize turns speculation off for a step whose running
	// batch has at least this many requests (vLLM's disable_by_batch_size;
	// 0 = never).
	DisableByBatchSize int `yaml:"disable_by_batch_size,omitempty"`
	// DraftStepUS, when > 0, is the time of one draft pass, in place of
	// the roofline's estimate of the draft model or head.
	DraftStepUS float64 `yaml:"draft_step_us,omitempty"`
}

// Speculative methods.
const (
	SpecDraftModel = "draft_model"
	SpecEagle      = "eagle"
	SpecEagle3     = "eagle3"
	SpecNgram      = "ngram"
)

// SpecMethods lists the methods in documentation order.
var SpecMethods = []string{SpecDraftModel, SpecEagle, SpecEagle3, SpecNgram}

// MaxSpecTokens bounds num_speculative_tokens (vLLM's EAGLE and draft
// models are run with single digits; beyond 32 the acceptance of the last
// drafts is nil for any real α).
const MaxSpecTokens = 32

// UnmarshalYAML fills absent keys with their defaults.
func (s *Speculative) UnmarshalYAML(n *yaml.Node) error {
	*s = Speculative{NumSpeculativeTokens: 3}
	type plain Speculative
	return n.Decode((*plain)(s))
}

// Classes is the slo_classes with their own acceptance rate, sorted (class
// i+1 of the scheduler's; 0 is the default rate).
func (s *Speculative) Classes() []string {
	names := make([]string, 0, len(s.AcceptanceByClass))
	for k := range s.AcceptanceByClass {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (c *Cluster) validateSpeculative(i int, d *Deployment) error {
	s := d.Speculative
	if s == nil {
		return nil
	}
	key := func(k string) string { return c.DeploymentKey(i, "speculative."+k) }
	if err := oneOf(c, key("method"), s.Method, SpecMethods); err != nil {
		return err
	}
	rate := func(k string, v float64) error {
		if !(v >= 0 && v <= 1) {
			return errors.New(c.Where(k, fmt.Sprintf("expected an acceptance probability in [0, 1], found %g", v)))
		}
		return nil
	}
	switch {
	case s.Method == SpecDraftModel && s.Model == "":
		return errors.New(c.Where(c.DeploymentKey(i, "speculative"), "method draft_model needs model: the draft model (e.g. qwen3-1.7b for qwen3-32b)"))
	case s.Method != SpecDraftModel && s.Model != "":
		return errors.New(c.Where(key("model"), fmt.Sprintf("only method draft_model runs a draft model (method is %s)", s.Method)))
	case s.NumSpeculativeTokens < 1 || s.NumSpeculativeTokens > MaxSpecTokens:
		return errors.New(c.Where(key("num_speculative_tokens"), fmt.Sprintf("expected 1 to %d, found %d", MaxSpecTokens, s.NumSpeculativeTokens)))
	case s.DisableByBatchSize < 0:
		return errors.New(c.Where(key("disable_by_batch_size"), fmt.Sprintf("expected >= 0, found %d", s.DisableByBatchSize)))
	case !(s.DraftStepUS >= 0 && s.DraftStepUS < 1e9):
		return errors.New(c.Where(key("draft_step_us"), fmt.Sprintf("expected µs >= 0, found %g", s.DraftStepUS)))
	case s.Method == SpecNgram && s.DraftStepUS > 0:
		return errors.New(c.Where(key("draft_step_us"), "ngram proposes on the CPU between steps: it has no draft pass to time"))
	case len(s.AcceptanceByClass) > 254:
		return errors.New(c.Where(key("acceptance_by_class"), fmt.Sprintf("expected at most 254 classes, found %d", len(s.AcceptanceByClass))))
	}
	if err := rate(key("acceptance_rate"), s.AcceptanceRate); err != nil {
		return err
	}
	for _, k := range s.Classes() {
		if err := rate(key("acceptance_by_class."+k), s.AcceptanceByClass[k]); err != nil {
			return err
		}
	}
	return nil
}
