package synth

import (
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// Reasoning makes a client's answers a chain of reasoning steps before the
// answer: output = answer + Σ chain_length steps of tokens_per_step tokens,
// so the length is long and only known at the end.
type Reasoning struct {
	ChainLength   *Dist `yaml:"chain_length"`    // steps per request (rounded, >= 1)
	TokensPerStep *Dist `yaml:"tokens_per_step"` // tokens of one step (rounded, >= 1)
}

// Multimodal adds images to a client's prompts (as the Azure 2025 multimodal
// trace records NumImages): each image adds tokens_per_image prompt tokens.
type Multimodal struct {
	Images         *Dist `yaml:"images"`           // images per request (rounded, >= 0)
	TokensPerImage *Dist `yaml:"tokens_per_image"` // prompt tokens of one image
}

// Correlation is the optional correlation structure of a client's requests.
type Correlation struct {
	// Prefix in [0, 1]: the chance a session keeps the client's previous
	// session's system prompt (0 = independent draws, 1 = always the same).
	Prefix *float64 `yaml:"prefix"`
	// BurstSize in [0, 1]: a prompt in a burst of n sessions is n^burst_size
	// times its sampled length (bursty tenants send larger prompts in bursts).
	BurstSize *float64 `yaml:"burst_size"`
	// PromptGrowth >= 0: turn k's new message is (1+rate)^k times its sample.
	PromptGrowth *float64 `yaml:"prompt_growth"`
	// OutputSpread >= 0: a session draws its own mean answer length from
	// output; each turn is that mean × lognormal(−s²/2, s) (mean preserved).
	OutputSpread *float64 `yaml:"output_spread"`
}

// Archetype is shorthand for a tenant's typical settings (archetypeTable).
type Archetype struct {
	Size           string `yaml:"size"`            // small, medium, large, elephant
	PrefixAffinity string `yaml:"prefix_affinity"` // none, low, medium, high
	Burst          string `yaml:"burst"`           // none, low, high
	Sessions       string `yaml:"sessions"`        // single, short, long
}

func f64(v float64) *float64 { return &v }

func lognormalDist(median, sigma, max float64) *Dist {
	return &Dist{Kind: "lognormal", Mu: f64(math.Log(median)), Sigma: f64(sigma), Max: f64(max)}
}

// archetypeSizes: prompt and answer lengths by size (medians; lognormal).
var archetypeSizes = map[string]struct {
	in, inSigma, inMax, out, outMax float64
}{
	"small":    {200, 0.6, 2000, 150, 1000},
	"medium":   {1000, 0.6, 8000, 250, 2000},
	"large":    {4000, 0.5, 32000, 400, 4000},
	"elephant": {20000, 0.4, 128000, 600, 8000},
}

var archetypeAffinity = map[string]struct{ reuse, corr float64 }{
	"none": {0, 0}, "low": {0.3, 0.2}, "medium": {0.7, 0.5}, "high": {0.95, 0.9},
}

// expandArchetype fills a client's absent keys from its archetype. Keys the
// client gives explicitly win.
func (s *Spec) expandArchetype(c *Client, p path, cn string) error {
	a := c.Archetype
	if a == nil {
		return nil
	}
	ap := p.add("archetype")
	check := func(field, v string, allowed ...string) error {
		if v != "" && !slices.Contains(allowed, v) {
			return s.errAt(ap.add(field), "%s: archetype %s: expected %s, found %q", cn, field, strings.Join(allowed, ", "), v)
		}
		return nil
	}
	for _, e := range []error{
		check("size", a.Size, "small", "medium", "large", "elephant"),
		check("prefix_affinity", a.PrefixAffinity, "none", "low", "medium", "high"),
		check("burst", a.Burst, "none", "low", "high"),
		check("sessions", a.Sessions, "single", "short", "long"),
	} {
		if e != nil {
			return e
		}
	}
	if c.Agentic != nil {
		return s.errAt(ap, "%s: archetype applies to chat and completion clients, not agentic ones", cn)
	}
	if c.Correlation == nil {
		c.Correlation = &Correlation{}
	}
	corr := c.Correlation
	if a.Size != "" {
		z := archetypeSizes[a.Size]
		if c.Input == nil {
			c.Input = lognormalDist(z.in, z.inSigma, z.inMax)
		}
		if c.Output == nil {
			c.Output = lognormalDist(z.out, 0.7, z.outMax)
		}
	}
	if a.PrefixAffinity != "" && a.PrefixAffinity != "none" {
		if len(s.PrefixGroups) == 0 {
			return s.errAt(ap.add("prefix_affinity"), "%s: archetype prefix_affinity %s needs prefix_groups at the top level", cn, a.PrefixAffinity)
		}
		f := archetypeAffinity[a.PrefixAffinity]
		if c.Prefix == nil {
			c.Prefix = &PrefixUse{}
		}
		if c.Prefix.ReuseProbability == nil {
			c.Prefix.ReuseProbability = f64(f.reuse)
		}
		if corr.Prefix == nil {
			corr.Prefix = f64(f.corr)
		}
	}
	if a.Burst != "" && a.Burst != "none" && c.Behaviour == nil {
		if a.Burst == "low" {
			c.Behaviour = &Behaviour{Type: "bursty", BurstProbability: 0.02, BurstSize: &Dist{Kind: "uniform", Min: f64(2), Max: f64(10)}, BurstInterval: 50000}
			if corr.BurstSize == nil {
				corr.BurstSize = f64(0.2)
			}
		} else {
			c.Behaviour = &Behaviour{Type: "bursty", BurstProbability: 0.1, BurstSize: &Dist{Kind: "uniform", Min: f64(5), Max: f64(50)}, BurstInterval: 20000}
			if corr.BurstSize == nil {
				corr.BurstSize = f64(0.5)
			}
		}
	}
	if c.Conversation == nil {
		switch a.Sessions {
		case "short":
			c.Conversation = &Conversation{Turns: &Dist{Kind: "uniform", Min: f64(1), Max: f64(4)},
				ThinkTime: lognormalDist(10, 0.8, 300), ContextGrowth: "accumulate"}
		case "long":
			c.Conversation = &Conversation{Turns: &Dist{Kind: "uniform", Min: f64(5), Max: f64(30)},
				ThinkTime: lognormalDist(20, 0.8, 600), ContextGrowth: "accumulate"}
			if corr.PromptGrowth == nil {
				corr.PromptGrowth = f64(0.05)
			}
			if corr.OutputSpread == nil {
				corr.OutputSpread = f64(0.3)
			}
		}
	}
	return nil
}

// compileFeatures validates the issue-19 keys of a client (after the
// archetype expanded and the base keys compiled).
func (s *Spec) compileFeatures(c *Client, p path, cn string) error {
	if c.RequestType != "" && !slices.Contains(trace.RequestTypes, c.RequestType) {
		return s.errAt(p.add("request_type"), "%s: request_type: expected %s, found %q", cn, strings.Join(trace.RequestTypes, ", "), c.RequestType)
	}
	if r := c.Reasoning; r != nil {
		rp := p.add("reasoning")
		if c.Agentic != nil {
			return s.errAt(rp, "%s: reasoning applies to chat and completion clients; an agentic workflow's steps carry their own lengths", cn)
		}
		if r.ChainLength == nil || r.TokensPerStep == nil {
			return s.errAt(rp, "%s: reasoning needs chain_length and tokens_per_step (distributions)", cn)
		}
		if err := s.compileDist(r.ChainLength, rp.add("chain_length"), cn+" reasoning chain_length"); err != nil {
			return err
		}
		if err := s.compileDist(r.TokensPerStep, rp.add("tokens_per_step"), cn+" reasoning tokens_per_step"); err != nil {
			return err
		}
	}
	if m := c.Multimodal; m != nil {
		mp := p.add("multimodal")
		if c.Agentic != nil {
			return s.errAt(mp, "%s: multimodal applies to chat and completion clients, not agentic ones", cn)
		}
		if m.Images == nil || m.TokensPerImage == nil {
			return s.errAt(mp, "%s: multimodal needs images (per request) and tokens_per_image (distributions)", cn)
		}
		if err := s.compileDist(m.Images, mp.add("images"), cn+" multimodal images"); err != nil {
			return err
		}
		if m.Images.lower() < 0 {
			return s.errAt(mp.add("images"), "%s: multimodal images: a %s distribution can be negative; set min: 0", cn, m.Images.Kind)
		}
		if err := s.compileDist(m.TokensPerImage, mp.add("tokens_per_image"), cn+" multimodal tokens_per_image"); err != nil {
			return err
		}
	}
	if cr := c.Correlation; cr != nil {
		cp := p.add("correlation")
		for _, f := range []struct {
			name string
			v    *float64
			max  float64
		}{{"prefix", cr.Prefix, 1}, {"burst_size", cr.BurstSize, 1}, {"prompt_growth", cr.PromptGrowth, 10}, {"output_spread", cr.OutputSpread, 5}} {
			if f.v != nil && (!(*f.v >= 0) || *f.v > f.max) {
				return s.errAt(cp.add(f.name), "%s: correlation %s: expected a value in [0, %s], found %s", cn, f.name, fmtFloat(f.max), fmtFloat(*f.v))
			}
		}
		if cr.Prefix != nil && *cr.Prefix > 0 && c.Prefix == nil {
			return s.errAt(cp.add("prefix"), "%s: correlation prefix needs a prefix: block (which system prompts the sessions draw)", cn)
		}
		if cr.BurstSize != nil && *cr.BurstSize > 0 && c.Behaviour.Type != "bursty" && c.Behaviour.Attack != "synchronized_burst" {
			return s.errAt(cp.add("burst_size"), "%s: correlation burst_size needs behaviour bursty (or attack synchronized_burst)", cn)
		}
		if cr.PromptGrowth != nil && *cr.PromptGrowth > 0 && c.Conversation == nil {
			return s.errAt(cp.add("prompt_growth"), "%s: correlation prompt_growth needs a conversation (it grows per turn)", cn)
		}
		if cr.OutputSpread != nil && *cr.OutputSpread > 0 && c.Agentic != nil {
			return s.errAt(cp.add("output_spread"), "%s: correlation output_spread applies to chat and completion clients", cn)
		}
	}
	if cp := c.ConversationalProbability; cp != nil {
		if c.Conversation == nil {
			return s.errAt(p.add("conversational_probability"), "%s: conversational_probability needs conversation (the turns of the sessions that are conversations)", cn)
		}
		if !(*cp >= 0 && *cp <= 1) {
			return s.errAt(p.add("conversational_probability"), "%s: conversational_probability: expected a probability in [0, 1], found %s", cn, fmtFloat(*cp))
		}
	}
	if d := c.Priority; d != nil {
		pp := p.add("priority")
		if err := s.compileDist(d, pp, cn+" priority"); err != nil {
			return err
		}
		if d.constant {
			if d.a != math.Round(d.a) || d.a < math.MinInt32 || d.a > math.MaxInt32 {
				return s.errAt(pp, "%s: priority: expected an integer (int32), found %s", cn, fmtFloat(d.a))
			}
			c.prio = int32(d.a)
		} else if d.lower() < math.MinInt32 || d.upper() > math.MaxInt32 {
			return s.errAt(pp, "%s: priority: a %s distribution can leave the int32 range; bound it with min and max", cn, d.Kind)
		}
	}
	return nil
}

// compileAdversarial validates behaviour adversarial: an attack inside a
// window that raises the rate (through a spike load profile) and replaces
// the prompts (long_prompt_flood) or the sessions (kv_exhaustion).
func (s *Spec) compileAdversarial(c *Client, p path, cn string) error {
	b := c.Behaviour
	switch b.Attack {
	case "long_prompt_flood", "kv_exhaustion", "synchronized_burst":
	case "":
		return s.errAt(p, "%s: behaviour adversarial needs attack: long_prompt_flood, kv_exhaustion or synchronized_burst", cn)
	default:
		return s.errAt(p.add("attack"), "%s: behaviour adversarial attack: expected long_prompt_flood, kv_exhaustion or synchronized_burst, found %q", cn, b.Attack)
	}
	if b.Attack != "synchronized_burst" && (b.Period != 0 || b.Offset != 0 || b.Spread != 0) {
		return s.errAt(p.add("period"), "%s: period, offset and spread apply to attack synchronized_burst", cn)
	}
	if b.Start < 0 || b.Duration < 0 {
		return s.errAt(p.add("start"), "%s: behaviour adversarial: start and duration must be >= 0", cn)
	}
	if b.RateMultiplier == 0 {
		b.RateMultiplier = 1
	}
	if b.RateMultiplier < 1 || !finite(b.RateMultiplier) {
		return s.errAt(p.add("rate_multiplier"), "%s: rate_multiplier: expected >= 1, found %s", cn, fmtFloat(b.RateMultiplier))
	}
	if b.Input == nil && b.Attack != "synchronized_burst" {
		return s.errAt(p, "%s: behaviour adversarial needs input (the attack's prompt lengths)", cn)
	}
	if err := s.compileDist(b.Input, p.add("input"), cn+" attack input"); err != nil {
		return err
	}
	if err := s.compileDist(b.Output, p.add("output"), cn+" attack output"); err != nil {
		return err
	}
	if c.Agentic != nil {
		return s.errAt(p, "%s: behaviour adversarial applies to chat and completion clients", cn)
	}
	switch b.Attack {
	case "synchronized_burst":
		if b.Turns != nil || b.ThinkTime != nil {
			return s.errAt(p.add("turns"), "%s: turns and think_time apply to attack kv_exhaustion", cn)
		}
		if b.Period <= 0 || b.BurstSize == nil {
			return s.errAt(p, "%s: attack synchronized_burst needs period > 0 and burst_size (sessions per burst, on a clock shared by every client)", cn)
		}
		if b.Offset < 0 || b.Spread < 0 || b.Spread >= b.Period {
			return s.errAt(p.add("spread"), "%s: attack synchronized_burst: offset >= 0 and 0 <= spread < period", cn)
		}
		if err := s.compileDist(b.BurstSize, p.add("burst_size"), cn+" attack burst_size"); err != nil {
			return err
		}
		b.syncArrival = &Arrival{Process: "synchronized", Period: b.Period, Offset: b.Offset, Spread: b.Spread, BurstSize: b.BurstSize}
	case "long_prompt_flood":
		if b.Turns != nil || b.ThinkTime != nil {
			return s.errAt(p.add("turns"), "%s: turns and think_time apply to attack kv_exhaustion", cn)
		}
	case "kv_exhaustion":
		if b.Turns == nil {
			return s.errAt(p, "%s: attack kv_exhaustion needs turns (each session keeps its context alive for that many turns)", cn)
		}
		if err := s.compileDist(b.Turns, p.add("turns"), cn+" attack turns"); err != nil {
			return err
		}
		if err := s.compileTime(b.ThinkTime, p.add("think_time"), cn+" attack think_time"); err != nil {
			return err
		}
		b.attackConv = &Conversation{Turns: b.Turns, ThinkTime: b.ThinkTime, ContextGrowth: "accumulate"}
	}
	if b.RateMultiplier != 1 {
		if c.LoadProfile != nil {
			return s.errAt(p.add("rate_multiplier"), "%s: an attack's rate_multiplier is a spike load profile; remove load_profile (or rate_multiplier)", cn)
		}
		d := b.Duration
		if d == 0 {
			d = Duration(1e12 * 1e6 / 2)
		}
		c.LoadProfile = &Profile{Type: "spike", At: b.Start, Duration: d, Multiplier: f64(b.RateMultiplier)}
	}
	return nil
}

// inAttack reports whether t (µs) is inside an adversarial client's window.
func (b *Behaviour) inAttack(t int64) bool {
	return b.Type == "adversarial" && t >= int64(b.Start) && (b.Duration == 0 || t < int64(b.Start+b.Duration))
}

// nextAttackBurst moves a synchronized_burst client to its next burst
// arrival inside the attack window (syncNext -1 when there is none).
func (cg *clientGen) nextAttackBurst() {
	b := cg.c.Behaviour
	for {
		t, ok := cg.syncA.nextSync(cg.syncRNG)
		if !ok || (b.Duration > 0 && t >= int64(b.Start+b.Duration)) {
			cg.syncNext = -1
			return
		}
		if t >= int64(b.Start) {
			cg.syncNext, cg.syncN = t, cg.syncA.burstN
			return
		}
	}
}

// compileSynchronized validates the synchronized arrival process.
func (s *Spec) compileSynchronized(c *Client, ap path, cn string) error {
	a := c.Arrival
	if a.Period <= 0 {
		return s.errAt(ap, "%s: arrival process synchronized needs period > 0 (time between bursts, the same clock for every client)", cn)
	}
	if a.Offset < 0 || a.Spread < 0 {
		return s.errAt(ap.add("offset"), "%s: arrival synchronized: offset and spread must be >= 0", cn)
	}
	if a.Spread >= a.Period {
		return s.errAt(ap.add("spread"), "%s: arrival synchronized: spread must be shorter than period", cn)
	}
	if a.BurstSize == nil {
		return s.errAt(ap, "%s: arrival process synchronized needs burst_size (sessions per burst)", cn)
	}
	if c.LoadProfile != nil {
		return s.errAt(ap, "%s: a synchronized client keeps its burst clock; remove load_profile", cn)
	}
	return s.compileDist(a.BurstSize, ap.add("burst_size"), cn+" arrival burst_size")
}

// requestType is the type of a client's llm rows (before images).
func (c *Client) requestType(conv bool) string {
	switch {
	case c.RequestType != "":
		return c.RequestType
	case c.Agentic != nil:
		return trace.TypeAgentic
	case c.Reasoning != nil:
		return trace.TypeReasoning
	case conv:
		return trace.TypeChat
	}
	return trace.TypeCompletion
}
