package synth

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// plan is a compiled agentic workflow: steps in execution order (before the
// loop, the loop body, after the loop).
type plan struct {
	steps              []*pstep
	loopStart, loopEnd int   // steps[loopStart:loopEnd] is the loop body (equal when none)
	entries, exits     []int // loop steps that start / end an iteration
	maxIter            int
	iters              *Dist
}

type pstep struct {
	id         string
	tool       *Tool
	toolName   string
	in, out    *Dist
	parents    []int // indices into plan.steps (forward edges only)
	fan        int
	accumulate bool
	inLoop     bool
	terminal   bool // no step depends on it
}

const maxTurns = 100000

var stepIDRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.]*$`)

func (s *Spec) compile() error {
	if s.Version != 1 {
		return s.errAt(path{"version"}, "version: expected 1, found %d", s.Version)
	}
	switch s.Mode {
	case "":
		s.Mode = ModeRate
	case ModeRate, ModeOffline, ModeConcurrency:
	default:
		return s.errAt(path{"mode"}, "mode: expected rate, offline or concurrency, found %q", s.Mode)
	}
	if s.PrefixBlockSize == 0 {
		s.PrefixBlockSize = 16
	}
	if s.PrefixBlockSize < 1 || s.PrefixBlockSize > 1<<20 {
		return s.errAt(path{"prefix_block_size"}, "prefix_block_size: expected tokens per block in 1..1048576, found %d", s.PrefixBlockSize)
	}
	if s.NumRequests < 0 {
		return s.errAt(path{"num_requests"}, "num_requests: expected > 0, found %d", s.NumRequests)
	}
	if s.MaxInFlight < 0 {
		return s.errAt(path{"max_in_flight"}, "max_in_flight: expected a positive number of requests (or 0 for no cap), found %d", s.MaxInFlight)
	}
	if s.Horizon < 0 {
		return s.errAt(path{"horizon"}, "horizon: expected > 0, found %v", s.Horizon)
	}
	if s.AggregateRate < 0 || !finite(s.AggregateRate) {
		return s.errAt(path{"aggregate_rate"}, "aggregate_rate: expected a rate > 0 in requests per second, found %s", fmtFloat(s.AggregateRate))
	}
	if len(s.Clients) == 0 {
		return s.errAt(path{"clients"}, "clients: expected at least one client")
	}
	allReplay := true
	for _, c := range s.Clients {
		if c != nil && (c.Arrival == nil || c.Arrival.Process != "replay") {
			allReplay = false
		}
	}
	switch s.Mode {
	case ModeRate:
		if s.Horizon == 0 && s.NumRequests == 0 && !allReplay {
			return s.errAt(nil, "the spec needs horizon or num_requests (or both) to end")
		}
		if s.AggregateRate == 0 && !allReplay {
			return s.errAt(path{"aggregate_rate"}, "aggregate_rate: expected a rate > 0 in requests per second")
		}
		if s.Concurrency != 0 || s.ThinkTime != nil {
			return s.errAt(path{"concurrency"}, "concurrency and think_time apply to mode: concurrency only")
		}
	case ModeOffline, ModeConcurrency:
		if s.NumRequests == 0 {
			return s.errAt(path{"mode"}, "mode %s needs num_requests", s.Mode)
		}
		if s.Horizon != 0 {
			return s.errAt(path{"horizon"}, "horizon: arrivals in mode %s are not timed; use num_requests (blis-sim takes its own --horizon)", s.Mode)
		}
		if s.AggregateRate == 0 {
			s.AggregateRate = 1 // only the client mix matters
		}
		if s.Mode == ModeOffline && (s.Concurrency != 0 || s.ThinkTime != nil) {
			return s.errAt(path{"concurrency"}, "concurrency and think_time apply to mode: concurrency only")
		}
		if s.Mode == ModeConcurrency {
			if s.Concurrency < 1 || s.Concurrency > 1000000 {
				return s.errAt(path{"concurrency"}, "concurrency: mode concurrency needs the number of virtual users (1 to 1000000), found %d", s.Concurrency)
			}
			if err := s.compileTime(s.ThinkTime, path{"think_time"}, "think_time"); err != nil {
				return err
			}
		}
	}
	groups := map[string]int{}
	for i := range s.PrefixGroups {
		g := &s.PrefixGroups[i]
		p := path{"prefix_groups", i}
		if g.Name == "" {
			return s.errAt(p, "prefix_groups[%d]: missing name", i)
		}
		if _, dup := groups[g.Name]; dup {
			return s.errAt(p.add("name"), "prefix group %q is defined twice", g.Name)
		}
		groups[g.Name] = i
		if g.Length < 1 || g.Length > MaxPromptTokens {
			return s.errAt(p.add("length"), "prefix group %q: length: expected tokens in 1..%d, found %d", g.Name, MaxPromptTokens, g.Length)
		}
		if g.Weight == 0 {
			g.Weight = 1
		}
		if g.Weight < 0 || !finite(g.Weight) {
			return s.errAt(p.add("weight"), "prefix group %q: weight: expected > 0, found %s", g.Name, fmtFloat(g.Weight))
		}
	}
	for _, name := range sortedKeys(s.Tools) {
		t := s.Tools[name]
		p := path{"tools", name}
		if t == nil || t.Latency == nil {
			return s.errAt(p, "tool %q: missing latency (a distribution in seconds)", name)
		}
		if err := s.compileTime(t.Latency, p.add("latency"), fmt.Sprintf("tool %q latency", name)); err != nil {
			return err
		}
		if err := s.compileDist(t.OutputTokens, p.add("output_tokens"), fmt.Sprintf("tool %q output_tokens", name)); err != nil {
			return err
		}
	}
	names := map[string]bool{}
	fractions := 0.0
	for i, c := range s.Clients {
		p := path{"clients", i}
		if c == nil {
			return s.errAt(p, "clients[%d]: empty client", i)
		}
		if c.Name == "" {
			return s.errAt(p, "clients[%d]: missing name", i)
		}
		if strings.IndexFunc(c.Name, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) >= 0 {
			return s.errAt(p.add("name"), "client %q: name may use letters, digits, '-', '_' and '.' only (it starts every request_id)", c.Name)
		}
		if names[c.Name] {
			return s.errAt(p.add("name"), "client %q is defined twice", c.Name)
		}
		names[c.Name] = true
		if c.Timeout < 0 {
			return s.errAt(p.add("timeout"), "client %q: timeout: expected a duration > 0 (or absent: never), found %v", c.Name, time.Duration(c.Timeout)*time.Microsecond)
		}
		if err := s.expandArchetype(c, p, fmt.Sprintf("client %q", c.Name)); err != nil {
			return err
		}
		if err := s.compileClient(c, p, groups); err != nil {
			return err
		}
		if err := s.compileLoRA(c, p); err != nil {
			return err
		}
		if c.RateFraction != nil {
			fractions += *c.RateFraction
		}
	}
	if fractions > 1+1e-9 {
		return s.errAt(path{"clients"}, "clients: rate_fraction values sum to %s, expected <= 1", fmtFloat(fractions))
	}
	for i, c := range s.Clients {
		for _, o := range s.Clients {
			if strings.HasPrefix(c.Name, o.Name+"-") {
				return s.errAt(path{"clients", i, "name"}, "client %q: its name starts with another client's name %q and a '-', so request ids could collide; rename one", c.Name, o.Name)
			}
		}
	}
	for i, c := range s.Clients {
		if c.RateFraction == nil && c.replay == nil && c.Arrival.Process != "synchronized" && fractions >= 1-1e-9 {
			return s.errAt(path{"clients", i}, "client %q: rate_fraction clients take the whole aggregate_rate, so its weight gets no rate; give it a rate_fraction", c.Name)
		}
	}
	return nil
}

// compileTime compiles a distribution of seconds that must never be negative.
func (s *Spec) compileTime(d *Dist, p path, what string) error {
	if err := s.compileDist(d, p, what); err != nil {
		return err
	}
	if d != nil && d.lower() < 0 {
		return s.errAt(p, "%s: a %s distribution can be negative here; latencies and think times never are (set min: 0)", what, d.Kind)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (s *Spec) compileClient(c *Client, p path, groups map[string]int) error {
	cn := fmt.Sprintf("client %q", c.Name)
	switch {
	case c.Weight != nil && c.RateFraction != nil:
		return s.errAt(p.add("rate_fraction"), "%s: give weight or rate_fraction, not both", cn)
	case c.Weight != nil && (*c.Weight <= 0 || !finite(*c.Weight)):
		return s.errAt(p.add("weight"), "%s: weight: expected > 0, found %s", cn, fmtFloat(*c.Weight))
	case c.RateFraction != nil && (*c.RateFraction <= 0 || *c.RateFraction > 1):
		return s.errAt(p.add("rate_fraction"), "%s: rate_fraction: expected a share in (0, 1], found %s", cn, fmtFloat(*c.RateFraction))
	}
	if c.Streaming != nil && (*c.Streaming < 0 || *c.Streaming > 1) {
		return s.errAt(p.add("streaming"), "%s: streaming: expected a probability in [0, 1], found %s", cn, fmtFloat(*c.Streaming))
	}
	if c.Agentic != nil && c.Conversation != nil {
		return s.errAt(p.add("conversation"), "%s: agentic and conversation exclude each other (an agentic workflow is the session)", cn)
	}
	if c.Agentic == nil {
		if c.Input == nil {
			return s.errAt(p, "%s: missing input (a token length distribution)", cn)
		}
		if c.Output == nil {
			return s.errAt(p, "%s: missing output (a token length distribution)", cn)
		}
	} else if c.Input != nil || c.Output != nil {
		return s.errAt(p.add("input"), "%s: an agentic client takes its lengths from its steps; remove input/output", cn)
	}
	if err := s.compileDist(c.Input, p.add("input"), cn+" input"); err != nil {
		return err
	}
	if err := s.compileDist(c.Output, p.add("output"), cn+" output"); err != nil {
		return err
	}
	if err := s.compileArrival(c, p, cn); err != nil {
		return err
	}
	if err := s.compileProfile(c, p.add("load_profile"), cn); err != nil {
		return err
	}
	if pu := c.Prefix; pu != nil {
		if len(s.PrefixGroups) == 0 {
			return s.errAt(p.add("prefix"), "%s: prefix needs prefix_groups at the top level", cn)
		}
		for j, g := range pu.Groups {
			if _, ok := groups[g]; !ok {
				return s.errAt(p.add("prefix", "groups", j), "%s: prefix group %q is not in prefix_groups", cn, g)
			}
		}
		if r := pu.ReuseProbability; r != nil && (*r < 0 || *r > 1) {
			return s.errAt(p.add("prefix", "reuse_probability"), "%s: reuse_probability: expected a probability in [0, 1], found %s", cn, fmtFloat(*r))
		}
	}
	if err := s.compileBehaviour(c, p.add("behaviour"), cn); err != nil {
		return err
	}
	if cv := c.Conversation; cv != nil {
		cp := p.add("conversation")
		if cv.Turns == nil {
			return s.errAt(cp, "%s: conversation needs turns (a distribution of turns per session)", cn)
		}
		if err := s.compileDist(cv.Turns, cp.add("turns"), cn+" conversation turns"); err != nil {
			return err
		}
		if err := s.compileTime(cv.ThinkTime, cp.add("think_time"), cn+" conversation think_time"); err != nil {
			return err
		}
		if cv.ContextGrowth != "" && cv.ContextGrowth != "accumulate" && cv.ContextGrowth != "none" {
			return s.errAt(cp.add("context_growth"), "%s: context_growth: expected accumulate or none, found %q", cn, cv.ContextGrowth)
		}
	}
	if err := s.compileFeatures(c, p, cn); err != nil {
		return err
	}
	if c.Agentic != nil {
		return s.compileAgentic(c, p.add("agentic"), cn)
	}
	return nil
}

func (s *Spec) compileArrival(c *Client, p path, cn string) error {
	if c.Arrival == nil {
		c.Arrival = &Arrival{Process: "poisson"}
	}
	a := c.Arrival
	ap := p.add("arrival")
	if a.Process == "" {
		a.Process = "poisson"
	}
	only := func(ok bool, field string) error {
		if !ok {
			return s.errAt(ap.add(field), "%s: arrival %s does not apply to process %s", cn, field, a.Process)
		}
		return nil
	}
	if err := only(a.CV == nil || a.Process == "gamma" || a.Process == "weibull", "cv"); err != nil {
		return err
	}
	if err := only(a.Jitter == 0 || a.Process == "constant", "jitter"); err != nil {
		return err
	}
	if err := only((a.Path == "" && a.Column == "" && a.Unit == "" && a.Speedup == 0) || a.Process == "replay", "path"); err != nil {
		return err
	}
	if err := only((a.Period == 0 && a.Offset == 0 && a.Spread == 0 && a.BurstSize == nil) || a.Process == "synchronized", "period"); err != nil {
		return err
	}
	switch a.Process {
	case "poisson":
	case "gamma", "weibull":
		if a.CV == nil || *a.CV <= 0 || !finite(*a.CV) {
			return s.errAt(ap, "%s: arrival process %s needs cv > 0 (coefficient of variation of the gaps; 1 is Poisson-like)", cn, a.Process)
		}
		if *a.CV > 20 {
			return s.errAt(ap.add("cv"), "%s: %s cv: expected <= 20, found %s", cn, a.Process, fmtFloat(*a.CV))
		}
	case "synchronized":
		return s.compileSynchronized(c, ap, cn)
	case "constant":
		if a.Jitter < 0 || a.Jitter >= 1 {
			return s.errAt(ap.add("jitter"), "%s: jitter: expected a fraction of the gap in [0, 1), found %s", cn, fmtFloat(a.Jitter))
		}
	case "replay":
		if a.Path == "" || a.Column == "" {
			return s.errAt(ap, "%s: arrival process replay needs path and column (a CSV file and its timestamp column)", cn)
		}
		if a.Speedup == 0 {
			a.Speedup = 1
		}
		if a.Speedup < 0 || !finite(a.Speedup) {
			return s.errAt(ap.add("speedup"), "%s: speedup: expected > 0, found %s", cn, fmtFloat(a.Speedup))
		}
		if c.LoadProfile != nil {
			return s.errAt(p.add("load_profile"), "%s: a replayed client keeps the trace's timing; remove load_profile", cn)
		}
		if s.Mode != ModeRate {
			return s.errAt(ap, "%s: arrival process replay needs mode: rate", cn)
		}
		times, err := s.readTimes(a, ap.add("path"), cn)
		if err != nil {
			return err
		}
		c.replay = times
	default:
		return s.errAt(ap.add("process"), "%s: arrival process: expected poisson, gamma, weibull, constant, replay or synchronized, found %q", cn, a.Process)
	}
	return nil
}

func (s *Spec) compileProfile(c *Client, p path, cn string) error {
	lp := c.LoadProfile
	if lp == nil {
		return nil
	}
	nonneg := func(v *float64, field string, required bool) error {
		if v == nil {
			if required {
				return s.errAt(p, "%s: load_profile %s needs %s", cn, lp.Type, field)
			}
			return nil
		}
		if *v < 0 || !finite(*v) {
			return s.errAt(p.add(field), "%s: load_profile %s: expected a multiplier >= 0, found %s", cn, field, fmtFloat(*v))
		}
		return nil
	}
	switch lp.Type {
	case "step":
		if len(lp.Steps) == 0 {
			return s.errAt(p, "%s: load_profile step needs steps: [{at, multiplier}, ...]", cn)
		}
		for i, st := range lp.Steps {
			if st.Multiplier < 0 || !finite(st.Multiplier) {
				return s.errAt(p.add("steps", i), "%s: load_profile steps[%d]: multiplier: expected >= 0, found %s", cn, i, fmtFloat(st.Multiplier))
			}
			if i > 0 && st.At <= lp.Steps[i-1].At {
				return s.errAt(p.add("steps", i), "%s: load_profile steps[%d]: at must increase", cn, i)
			}
		}
	case "ramp":
		if err := nonneg(lp.From, "from", true); err != nil {
			return err
		}
		if err := nonneg(lp.To, "to", true); err != nil {
			return err
		}
		if lp.End <= lp.Start {
			return s.errAt(p.add("end"), "%s: load_profile ramp: end must be after start", cn)
		}
	case "diurnal":
		if lp.Period <= 0 {
			return s.errAt(p, "%s: load_profile diurnal needs period > 0 (e.g. 24h)", cn)
		}
		if err := nonneg(lp.Min, "min", true); err != nil {
			return err
		}
		if err := nonneg(lp.Max, "max", true); err != nil {
			return err
		}
		if *lp.Max < *lp.Min || *lp.Max <= 0 {
			return s.errAt(p.add("max"), "%s: load_profile diurnal: max must be > 0 and >= min", cn)
		}
	case "spike":
		if lp.Duration <= 0 {
			return s.errAt(p, "%s: load_profile spike needs duration > 0", cn)
		}
		if err := nonneg(lp.Multiplier, "multiplier", true); err != nil {
			return err
		}
	default:
		return s.errAt(p.add("type"), "%s: load_profile type: expected step, ramp, diurnal or spike, found %q", cn, lp.Type)
	}
	return nil
}

func (s *Spec) compileBehaviour(c *Client, p path, cn string) error {
	b := c.Behaviour
	if b == nil {
		c.Behaviour = &Behaviour{Type: "normal"}
		return nil
	}
	prob := func(v float64, field string) error {
		if v < 0 || v > 1 {
			return s.errAt(p.add(field), "%s: %s: expected a probability in [0, 1], found %s", cn, field, fmtFloat(v))
		}
		return nil
	}
	bursty := b.BurstProbability != 0 || b.BurstSize != nil || b.BurstInterval != 0
	abusive := b.RateMultiplier != 0 || b.OversizeProbability != 0 || b.OversizeFactor != 0
	attack := b.Attack != "" || b.Start != 0 || b.Duration != 0 || b.Input != nil || b.Output != nil || b.Turns != nil || b.ThinkTime != nil ||
		b.Period != 0 || b.Offset != 0 || b.Spread != 0
	if attack && b.Type != "adversarial" {
		return s.errAt(p, "%s: attack, start, duration, input, output, turns, think_time, period, offset and spread apply to behaviour adversarial", cn)
	}
	switch b.Type {
	case "", "normal":
		b.Type = "normal"
		if bursty || abusive {
			return s.errAt(p, "%s: behaviour normal takes no parameters", cn)
		}
	case "bursty":
		if abusive {
			return s.errAt(p, "%s: behaviour bursty takes burst_probability, burst_size, burst_interval", cn)
		}
		if err := prob(b.BurstProbability, "burst_probability"); err != nil {
			return err
		}
		if b.BurstSize == nil {
			return s.errAt(p, "%s: behaviour bursty needs burst_size (requests per burst)", cn)
		}
		if err := s.compileDist(b.BurstSize, p.add("burst_size"), cn+" burst_size"); err != nil {
			return err
		}
		if b.BurstInterval < 0 {
			return s.errAt(p.add("burst_interval"), "%s: burst_interval: expected >= 0", cn)
		}
	case "abusive":
		if bursty {
			return s.errAt(p, "%s: behaviour abusive takes rate_multiplier, oversize_probability, oversize_factor", cn)
		}
		if b.RateMultiplier == 0 {
			b.RateMultiplier = 1
		}
		if b.RateMultiplier < 1 || !finite(b.RateMultiplier) {
			return s.errAt(p.add("rate_multiplier"), "%s: rate_multiplier: expected >= 1, found %s", cn, fmtFloat(b.RateMultiplier))
		}
		if err := prob(b.OversizeProbability, "oversize_probability"); err != nil {
			return err
		}
		if b.OversizeFactor == 0 {
			b.OversizeFactor = 1
		}
		if b.OversizeFactor < 1 || !finite(b.OversizeFactor) {
			return s.errAt(p.add("oversize_factor"), "%s: oversize_factor: expected >= 1, found %s", cn, fmtFloat(b.OversizeFactor))
		}
	case "adversarial":
		if b.BurstProbability != 0 || b.BurstInterval != 0 || (b.BurstSize != nil && b.Attack != "synchronized_burst") || b.OversizeProbability != 0 || b.OversizeFactor != 0 {
			return s.errAt(p, "%s: behaviour adversarial takes attack, start, duration, rate_multiplier, input, output, turns, think_time (and period, offset, burst_size, spread for synchronized_burst)", cn)
		}
		if k := c.Arrival.Process; b.RateMultiplier > 1 && (k == "replay" || k == "synchronized") {
			return s.errAt(p.add("rate_multiplier"), "%s: rate_multiplier needs an arrival process with a rate (not %s)", cn, k)
		}
		return s.compileAdversarial(c, p, cn)
	default:
		return s.errAt(p.add("type"), "%s: behaviour: expected normal, bursty, abusive or adversarial, found %q", cn, b.Type)
	}
	return nil
}

func (s *Spec) compileAgentic(c *Client, p path, cn string) error {
	a := c.Agentic
	if len(a.Steps) == 0 {
		return s.errAt(p, "%s: agentic needs steps", cn)
	}
	idx := map[string]int{}
	for i, st := range a.Steps {
		sp := p.add("steps", i)
		if st == nil || st.ID == "" {
			return s.errAt(sp, "%s: steps[%d]: missing id", cn, i)
		}
		if !stepIDRE.MatchString(st.ID) {
			return s.errAt(sp.add("id"), "%s: step id %q: expected a letter then letters, digits, '_' or '.' (ids become part of request_id)", cn, st.ID)
		}
		if _, dup := idx[st.ID]; dup {
			return s.errAt(sp.add("id"), "%s: step %q is defined twice", cn, st.ID)
		}
		idx[st.ID] = i
	}
	inLoop := make([]bool, len(a.Steps))
	if l := a.Loop; l != nil {
		lp := p.add("loop")
		if len(l.Over) == 0 {
			return s.errAt(lp, "%s: loop needs over: [step ids]", cn)
		}
		for j, id := range l.Over {
			i, ok := idx[id]
			if !ok {
				return s.errAt(lp.add("over", j), "%s: loop step %q is not a step", cn, id)
			}
			if inLoop[i] {
				return s.errAt(lp.add("over", j), "%s: loop step %q is listed twice", cn, id)
			}
			inLoop[i] = true
		}
		if l.MaxIterations < 1 || l.MaxIterations > 100000 {
			return s.errAt(lp, "%s: loop needs max_iterations in 1..100000 (loops must end)", cn)
		}
		if err := s.compileDist(l.Iterations, lp.add("iterations"), cn+" loop iterations"); err != nil {
			return err
		}
	}
	for i, st := range a.Steps {
		sp := p.add("steps", i)
		sn := fmt.Sprintf("%s step %q", cn, st.ID)
		switch st.Type {
		case "llm_call":
			if st.Tool != "" {
				return s.errAt(sp.add("tool"), "%s: an llm_call has no tool", sn)
			}
			if st.Input == nil || st.Output == nil {
				return s.errAt(sp, "%s: an llm_call needs both input and output distributions", sn)
			}
			if err := s.compileDist(st.Input, sp.add("input"), sn+" input"); err != nil {
				return err
			}
			if err := s.compileDist(st.Output, sp.add("output"), sn+" output"); err != nil {
				return err
			}
		case "tool_call":
			if st.Input != nil || st.Output != nil {
				return s.errAt(sp, "%s: a tool_call has no input/output distributions (latency and output tokens come from tools)", sn)
			}
			if st.Tool == "" {
				return s.errAt(sp, "%s: a tool_call needs tool", sn)
			}
			if _, ok := s.Tools[st.Tool]; !ok {
				known := strings.Join(sortedKeys(s.Tools), ", ")
				if known == "" {
					known = "none defined"
				}
				return s.errAt(sp.add("tool"), "%s: tool %q is not in tools (%s)", sn, st.Tool, known)
			}
		case "":
			return s.errAt(sp, "%s: missing type (llm_call or tool_call)", sn)
		default:
			return s.errAt(sp.add("type"), "%s: type: expected llm_call or tool_call, found %q", sn, st.Type)
		}
		if st.FanOut != nil && (*st.FanOut < 2 || *st.FanOut > 10000) {
			return s.errAt(sp.add("fan_out"), "%s: fan_out: expected 2 to 10000 parallel instances, found %d", sn, *st.FanOut)
		}
		switch st.ContextGrowth {
		case "", "none":
		case "accumulate":
			if st.Type != "llm_call" {
				return s.errAt(sp.add("context_growth"), "%s: context_growth applies to llm_call steps", sn)
			}
			if !inLoop[i] {
				return s.errAt(sp.add("context_growth"), "%s: context_growth: accumulate is only allowed inside a loop", sn)
			}
		default:
			return s.errAt(sp.add("context_growth"), "%s: context_growth: expected accumulate or none, found %q", sn, st.ContextGrowth)
		}
		seen := map[string]bool{}
		for j, d := range st.DependsOn {
			if _, ok := idx[d]; !ok {
				return s.errAt(sp.add("depends_on", j), "%s: depends_on %q is not a step", sn, d)
			}
			if d == st.ID {
				return s.errAt(sp.add("depends_on", j), "%s: depends on itself", sn)
			}
			if seen[d] {
				return s.errAt(sp.add("depends_on", j), "%s: depends_on lists %q twice", sn, d)
			}
			seen[d] = true
		}
	}
	n := len(a.Steps)
	// Forward edges: parents[i]; an edge into the implicit loop entry from inside the loop is a back-edge.
	parents := make([][]int, n)
	for i, st := range a.Steps {
		for _, d := range st.DependsOn {
			parents[i] = append(parents[i], idx[d])
		}
	}
	if a.Loop != nil {
		var entries []int
		for _, id := range a.Loop.Over {
			i := idx[id]
			internal := false
			for _, q := range parents[i] {
				internal = internal || inLoop[q]
			}
			if !internal {
				entries = append(entries, i)
			}
		}
		if len(entries) == 0 { // implicit entry: the first listed step; its in-loop deps are the back-edge
			e := idx[a.Loop.Over[0]]
			var keep []int
			for _, q := range parents[e] {
				if !inLoop[q] {
					keep = append(keep, q)
				}
			}
			parents[e] = keep
		}
		// connected (ignoring direction) within the loop
		adj := make([][]int, n)
		for i := range parents {
			for _, q := range parents[i] {
				if inLoop[i] && inLoop[q] {
					adj[i] = append(adj[i], q)
					adj[q] = append(adj[q], i)
				}
			}
		}
		seen := map[int]bool{}
		stack := []int{idx[a.Loop.Over[0]]}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v] {
				continue
			}
			seen[v] = true
			stack = append(stack, adj[v]...)
		}
		for j, id := range a.Loop.Over {
			if !seen[idx[id]] {
				return s.errAt(p.add("loop", "over", j), "%s: loop steps must form a connected subgraph; %q is not connected to %q by depends_on", cn, id, a.Loop.Over[0])
			}
		}
	}
	// Topological order (Kahn, stable by declaration order).
	children := make([][]int, n)
	indeg := make([]int, n)
	for i := range parents {
		indeg[i] = len(parents[i])
		for _, q := range parents[i] {
			children[q] = append(children[q], i)
		}
	}
	var roots []string
	for i := range a.Steps {
		if indeg[i] == 0 {
			roots = append(roots, a.Steps[i].ID)
		}
	}
	order := make([]int, 0, n)
	ready := []int{}
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		v := ready[0]
		ready = ready[1:]
		order = append(order, v)
		for _, ch := range children[v] {
			indeg[ch]--
			if indeg[ch] == 0 {
				ready = append(ready, ch)
			}
		}
	}
	if len(order) < n {
		var cyc []string
		for i := range a.Steps {
			if indeg[i] > 0 {
				cyc = append(cyc, a.Steps[i].ID)
			}
		}
		hint := ""
		if a.Loop == nil {
			hint = " (repetition needs a loop: block)"
		}
		return s.errAt(p.add("steps"), "%s: depends_on forms a cycle through steps %s that is not a loop back-edge%s", cn, strings.Join(cyc, ", "), hint)
	}
	if len(roots) != 1 {
		return s.errAt(p.add("steps"), "%s: a workflow needs exactly one root step (without depends_on, or an implicit loop entry), found %d: %s", cn, len(roots), strings.Join(roots, ", "))
	}
	// Loop contiguity: no step outside the loop lies between two loop steps.
	after := make([]bool, n) // descendant of a loop step
	before := make([]bool, n)
	for _, v := range order {
		for _, q := range parents[v] {
			if inLoop[q] || after[q] {
				after[v] = true
			}
		}
	}
	for k := n - 1; k >= 0; k-- {
		v := order[k]
		for _, ch := range children[v] {
			if inLoop[ch] || before[ch] {
				before[v] = true
			}
		}
	}
	for i, st := range a.Steps {
		if !inLoop[i] && after[i] && before[i] {
			return s.errAt(p.add("steps", i), "%s step %q: is outside the loop but between loop steps; add it to loop.over", cn, st.ID)
		}
	}
	// Execution order: before the loop, the loop, after it.
	pl := &plan{}
	pos := make([]int, n)
	for pass := 0; pass < 3; pass++ {
		if pass == 1 {
			pl.loopStart = len(pl.steps)
		}
		for _, v := range order {
			grp := 0
			if inLoop[v] {
				grp = 1
			} else if after[v] {
				grp = 2
			}
			if grp != pass {
				continue
			}
			st := a.Steps[v]
			ps := &pstep{id: st.ID, in: st.Input, out: st.Output, fan: 1, inLoop: inLoop[v],
				accumulate: st.ContextGrowth == "accumulate", terminal: len(children[v]) == 0}
			if st.FanOut != nil {
				ps.fan = *st.FanOut
			}
			if st.Type == "tool_call" {
				ps.tool, ps.toolName = s.Tools[st.Tool], st.Tool
			}
			pos[v] = len(pl.steps)
			pl.steps = append(pl.steps, ps)
		}
		if pass == 1 {
			pl.loopEnd = len(pl.steps)
		}
	}
	for _, v := range order {
		ps := pl.steps[pos[v]]
		for _, q := range parents[v] {
			ps.parents = append(ps.parents, pos[q])
		}
	}
	if a.Loop != nil {
		pl.maxIter = a.Loop.MaxIterations
		pl.iters = a.Loop.Iterations
		for i := pl.loopStart; i < pl.loopEnd; i++ {
			st := pl.steps[i]
			internalParent, internalChild := false, false
			for _, q := range st.parents {
				internalParent = internalParent || pl.steps[q].inLoop
			}
			for j := pl.loopStart; j < pl.loopEnd; j++ {
				internalChild = internalChild || slices.Contains(pl.steps[j].parents, i)
			}
			if !internalParent {
				pl.entries = append(pl.entries, i)
			}
			if !internalChild {
				pl.exits = append(pl.exits, i)
			}
		}
	}
	c.plan = pl
	return nil
}
