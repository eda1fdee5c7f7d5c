package synth

import (
	"fmt"
	"math"
)

// LoRAUse assigns each session of a client a LoRA adapter (the requests'
// lora column): one of Names, or of Adapters names Prefix0 … Prefix(N−1),
// drawn with Zipf weights 1/(rank+1)^Zipf (S-LoRA's and Punica's
// evaluations draw adapter popularity from power laws; 0 = uniform). Every
// request of the session uses the adapter, as an application does.
type LoRAUse struct {
	Adapters int      `yaml:"adapters"`
	Prefix   string   `yaml:"prefix"`
	Names    []string `yaml:"names"`
	Zipf     *float64 `yaml:"zipf"`
	// BaseFraction is the share of sessions on the base model (no adapter).
	BaseFraction float64 `yaml:"base_fraction"`

	names []string
	cum   []float64
}

// MaxLoRAAdapters bounds a client's adapters.
const MaxLoRAAdapters = 65535

func (s *Spec) compileLoRA(c *Client, p path) error {
	l := c.LoRA
	if l == nil {
		return nil
	}
	p = p.add("lora")
	switch {
	case len(l.Names) > 0 && l.Adapters > 0:
		return s.errAt(p, "client %q: lora: give adapters (a count) or names, not both", c.Name)
	case len(l.Names) == 0 && (l.Adapters < 1 || l.Adapters > MaxLoRAAdapters):
		return s.errAt(p.add("adapters"), "client %q: lora.adapters: expected 1..%d adapters (or names:), found %d", c.Name, MaxLoRAAdapters, l.Adapters)
	case len(l.Names) > MaxLoRAAdapters:
		return s.errAt(p.add("names"), "client %q: lora.names: expected at most %d, found %d", c.Name, MaxLoRAAdapters, len(l.Names))
	case l.Zipf != nil && !(*l.Zipf >= 0 && *l.Zipf <= 10):
		return s.errAt(p.add("zipf"), "client %q: lora.zipf: expected an exponent in [0, 10], found %g", c.Name, *l.Zipf)
	case !(l.BaseFraction >= 0 && l.BaseFraction <= 1):
		return s.errAt(p.add("base_fraction"), "client %q: lora.base_fraction: expected a fraction in [0, 1], found %g", c.Name, l.BaseFraction)
	}
	l.names = l.Names
	if len(l.names) == 0 {
		prefix := l.Prefix
		if prefix == "" {
			prefix = "adapter-"
		}
		for i := 0; i < l.Adapters; i++ {
			l.names = append(l.names, fmt.Sprintf("%s%d", prefix, i))
		}
	}
	seen := map[string]bool{}
	for i, n := range l.names {
		if n == "" || seen[n] {
			return s.errAt(p.add("names"), "client %q: lora.names[%d]: expected a distinct non-empty name, found %q", c.Name, i, n)
		}
		seen[n] = true
	}
	z := 1.0
	if l.Zipf != nil {
		z = *l.Zipf
	}
	l.cum = make([]float64, len(l.names))
	t := 0.0
	for i := range l.names {
		t += math.Pow(float64(i+1), -z)
		l.cum[i] = t
	}
	return nil
}

// draw is a session's adapter ("" = the base model).
func (l *LoRAUse) draw(r rng) string {
	if l.BaseFraction > 0 && r.r.Float64() < l.BaseFraction {
		return ""
	}
	return l.names[pick(l.cum, r.r.Float64())]
}
