package synth

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// Reasoning answers are the answer plus chain_length × tokens_per_step,
// exactly for constants; rows are marked reasoning.
func TestReasoningLengths(t *testing.T) {
	s := parse(t, `version: 1
num_requests: 50
aggregate_rate: 5
clients:
  - {name: r, input: 300, output: 100, reasoning: {chain_length: 5, tokens_per_step: 200}}
  - name: v
    input: 300
    output: 50
    reasoning: {chain_length: {dist: uniform, min: 1, max: 20}, tokens_per_step: {dist: lognormal, mu: 5, sigma: 0.5}}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	var varied []int32
	for _, r := range rows {
		if r.RequestType != trace.TypeReasoning {
			t.Fatalf("%s: request_type %q", r.ID, r.RequestType)
		}
		if strings.HasPrefix(r.ID, "r-") && r.OutputTokens != 100+5*200 {
			t.Fatalf("%s: output %d, want 1100", r.ID, r.OutputTokens)
		}
		if strings.HasPrefix(r.ID, "v-") {
			varied = append(varied, r.OutputTokens)
		}
	}
	if len(varied) < 10 || slices.Min(varied) == slices.Max(varied) {
		t.Fatalf("varied chains: %v", varied)
	}
}

// Images add tokens_per_image each to the prompt and set num_images; a
// request without images keeps its base type.
func TestMultimodal(t *testing.T) {
	s := parse(t, `version: 1
num_requests: 400
aggregate_rate: 5
clients:
  - name: m
    input: 100
    output: 20
    multimodal: {images: {dist: empirical, values: [0, 1, 3], weights: [2, 1, 1]}, tokens_per_image: 576}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	seen := map[int32]int{}
	for _, r := range rows {
		seen[r.NumImages]++
		if r.InputTokens != 100+576*r.NumImages {
			t.Fatalf("%s: input %d with %d images", r.ID, r.InputTokens, r.NumImages)
		}
		want := trace.TypeCompletion
		if r.NumImages > 0 {
			want = trace.TypeMultimodal
		}
		if r.RequestType != want {
			t.Fatalf("%s: type %q, want %q", r.ID, r.RequestType, want)
		}
	}
	if seen[0] < 100 || seen[1] < 50 || seen[3] < 50 {
		t.Fatalf("images: %v", seen)
	}
}

// correlation.prefix 1 keeps the first session's system prompt for the
// whole tenant even when reuse_probability makes it private; 0 leaves the
// private draws independent.
func TestPrefixCorrelation(t *testing.T) {
	for _, c := range []struct {
		corr     string
		distinct func(n int) bool
	}{
		{"1", func(n int) bool { return n == 1 }},
		{"0", func(n int) bool { return n > 150 }},
		{"0.9", func(n int) bool { return n > 5 && n < 60 }},
	} {
		s := parse(t, `version: 1
seed: 3
num_requests: 200
aggregate_rate: 5
prefix_groups: [{name: a, length: 64}, {name: b, length: 64}]
clients:
  - {name: t, input: 10, output: 5, prefix: {reuse_probability: 0}, correlation: {prefix: `+c.corr+`}}
`)
		rows, _ := collect(t, s)
		first := map[uint64]bool{}
		for _, r := range rows {
			first[r.PrefixHashes[0]] = true
		}
		if !c.distinct(len(first)) {
			t.Errorf("prefix correlation %s: %d distinct system prompts in %d sessions", c.corr, len(first), len(rows))
		}
	}
}

// A bursty tenant with burst_size correlation sends larger prompts in
// bursts: n^c times the sampled length.
func TestBurstSizeCorrelation(t *testing.T) {
	s := parse(t, `version: 1
seed: 5
horizon: 300s
aggregate_rate: 2
clients:
  - name: b
    input: 100
    output: 10
    behaviour: {type: bursty, burst_probability: 0.2, burst_size: 9, burst_interval: 1ms}
    correlation: {burst_size: 0.5}
`)
	rows, _ := collect(t, s)
	n := map[int32]int{}
	for _, r := range rows {
		n[r.InputTokens]++
	}
	if n[100] == 0 || n[300] == 0 || len(n) != 2 {
		t.Fatalf("inputs: %v (want 100 outside bursts, 100·9^0.5 = 300 inside)", n)
	}
}

// prompt_growth scales turn k's new message by (1+rate)^k; output_spread
// keeps each session's answers around its own mean.
func TestSessionModel(t *testing.T) {
	s := parse(t, `version: 1
seed: 9
num_requests: 3000
aggregate_rate: 2
clients:
  - name: c
    input: 100
    output: {dist: lognormal, mu: 5, sigma: 1}
    conversation: {turns: 10, context_growth: none}
    correlation: {prompt_growth: 0.5, output_spread: 0.1}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	within, across := 0.0, 0.0
	var means []float64
	var sess []float64
	flush := func() {
		if len(sess) == 0 {
			return
		}
		m := 0.0
		for _, v := range sess {
			m += math.Log(v)
		}
		m /= float64(len(sess))
		for _, v := range sess {
			within += (math.Log(v) - m) * (math.Log(v) - m)
		}
		means = append(means, m)
		sess = sess[:0]
	}
	for _, r := range rows {
		if want := int32(math.Round(100 * math.Pow(1.5, float64(r.LoopIteration)))); r.InputTokens != want {
			t.Fatalf("%s: turn %d input %d, want %d", r.ID, r.LoopIteration, r.InputTokens, want)
		}
		if r.LoopIteration == 0 {
			flush()
		}
		sess = append(sess, float64(r.OutputTokens))
	}
	flush()
	within /= float64(len(rows))
	gm := 0.0
	for _, m := range means {
		gm += m
	}
	gm /= float64(len(means))
	for _, m := range means {
		across += (m - gm) * (m - gm)
	}
	across /= float64(len(means))
	// Within a session the log-sd is about 0.1; across sessions about 1.
	if within > 0.03 || across < 0.5 {
		t.Fatalf("log variance within sessions %.3f, across %.3f", within, across)
	}
}

// conversational_probability: that share of sessions are conversations,
// the rest single requests; a priority distribution is drawn per session.
func TestConversationalProbabilityAndPriority(t *testing.T) {
	s := parse(t, `version: 1
seed: 4
num_requests: 6000
aggregate_rate: 5
clients:
  - name: c
    input: 50
    output: 20
    priority: {dist: empirical, values: [0, 1, 5], weights: [1, 1, 1]}
    conversation: {turns: 3}
    conversational_probability: 0.3
`)
	rows, st := collect(t, s)
	checkInvariants(t, s, rows)
	conv, prio := 0, map[int32]int{}
	sessPrio := map[string]int32{}
	for _, r := range rows {
		if r.SessionID != "" {
			if p, ok := sessPrio[r.SessionID]; ok && p != r.Priority {
				t.Fatalf("%s: priority %d differs within its session (%d)", r.ID, r.Priority, p)
			}
			sessPrio[r.SessionID] = r.Priority
			if r.LoopIteration == 0 {
				conv++
			}
			if r.RequestType != trace.TypeChat {
				t.Fatalf("%s: %q", r.ID, r.RequestType)
			}
		} else if r.RequestType != trace.TypeCompletion {
			t.Fatalf("%s: %q", r.ID, r.RequestType)
		}
		prio[r.Priority]++
	}
	frac := float64(conv) / float64(st.Sessions)
	if math.Abs(frac-0.3) > 0.03 {
		t.Fatalf("%.3f of sessions are conversations, want 0.3", frac)
	}
	if len(prio) != 3 {
		t.Fatalf("priorities %v", prio)
	}
}

// Synchronized clients burst together on the shared clock.
func TestSynchronizedBursts(t *testing.T) {
	s := parse(t, `version: 1
seed: 1
horizon: 100s
aggregate_rate: 1
clients:
  - {name: a, input: 10, output: 5, arrival: {process: synchronized, period: 20s, offset: 5s, burst_size: 30, spread: 200ms}}
  - {name: b, input: 10, output: 5, arrival: {process: synchronized, period: 20s, offset: 5s, burst_size: {dist: uniform, min: 10, max: 50}, spread: 200ms}}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	perBurst := map[int64]int{}
	for _, r := range rows {
		k := (r.ArrivalUS - 5_000_000) / 20_000_000
		off := (r.ArrivalUS - 5_000_000) % 20_000_000
		if off < 0 || off >= 200_000 {
			t.Fatalf("%s at %d: outside burst window", r.ID, r.ArrivalUS)
		}
		perBurst[k]++
	}
	if len(perBurst) != 5 {
		t.Fatalf("bursts %v", perBurst)
	}
}

// A long-prompt flood replaces the prompts and multiplies the rate inside
// its window only; KV exhaustion turns sessions into long-lived contexts.
func TestAdversarialAttacks(t *testing.T) {
	s := parse(t, `version: 1
seed: 2
horizon: 90s
aggregate_rate: 10
clients:
  - name: flood
    rate_fraction: 0.5
    input: 200
    output: 20
    behaviour: {type: adversarial, attack: long_prompt_flood, start: 30s, duration: 30s, rate_multiplier: 4, input: 60000, output: 1}
  - name: kv
    rate_fraction: 0.5
    input: 200
    output: 20
    behaviour: {type: adversarial, attack: kv_exhaustion, start: 30s, duration: 30s, input: 20000, output: 2000, turns: 5, think_time: 0.5}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	var before, during, kvTurns, kvOutside int
	for _, r := range rows {
		in := r.ArrivalUS >= 30e6 && r.ArrivalUS < 60e6
		switch {
		case strings.HasPrefix(r.ID, "flood-"):
			if in != (r.InputTokens == 60000) {
				t.Fatalf("%s at %d: input %d", r.ID, r.ArrivalUS, r.InputTokens)
			}
			if r.ArrivalUS < 30e6 {
				before++
			} else if in {
				during++
			}
		case r.ArrivalUS == trace.Null:
			kvTurns++
		case strings.HasPrefix(r.ID, "kv-") && !in:
			kvOutside++
			if r.SessionID != "" {
				t.Fatalf("%s outside the window is a conversation", r.ID)
			}
		}
	}
	if ratio := float64(during) / float64(before); ratio < 3 || ratio > 5 {
		t.Fatalf("flood rate ×%.2f in the window, want about 4", ratio)
	}
	if kvTurns < 400 || kvOutside < 200 {
		t.Fatalf("kv turns %d, outside rows %d", kvTurns, kvOutside)
	}
}

// An archetype is shorthand: the expanded spec gives the same rows as its
// written-out settings.
func TestArchetypeExpansion(t *testing.T) {
	short := parse(t, `version: 1
seed: 8
num_requests: 2000
aggregate_rate: 5
prefix_groups: [{name: sys, length: 500}]
clients:
  - {name: t, archetype: {size: medium, prefix_affinity: medium, burst: low, sessions: long}}
`)
	long := parse(t, `version: 1
seed: 8
num_requests: 2000
aggregate_rate: 5
prefix_groups: [{name: sys, length: 500}]
clients:
  - name: t
    input: {dist: lognormal, mu: 6.907755278982137, sigma: 0.6, max: 8000}
    output: {dist: lognormal, mu: 5.521460917862246, sigma: 0.7, max: 2000}
    prefix: {reuse_probability: 0.7}
    behaviour: {type: bursty, burst_probability: 0.02, burst_size: {dist: uniform, min: 2, max: 10}, burst_interval: 50ms}
    conversation:
      turns: {dist: uniform, min: 5, max: 30}
      think_time: {dist: lognormal, mu: 2.995732273553991, sigma: 0.8, max: 600}
      context_growth: accumulate
    correlation: {prefix: 0.5, burst_size: 0.2, prompt_growth: 0.05, output_spread: 0.3}
`)
	a, _ := collect(t, short)
	b, _ := collect(t, long)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d rows", len(a), len(b))
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].InputTokens != b[i].InputTokens || a[i].OutputTokens != b[i].OutputTokens || a[i].ArrivalUS != b[i].ArrivalUS {
			t.Fatalf("row %d: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// Behaviour synchronized_burst adds bursts on the shared clock, inside the
// attack window, on top of the client's own process; a burst's prompts
// follow the burst-size correlation.
func TestSynchronizedBurstBehaviour(t *testing.T) {
	s := parse(t, `version: 1
seed: 3
horizon: 100s
aggregate_rate: 2
clients:
  - name: a
    input: 100
    output: 5
    behaviour: {type: adversarial, attack: synchronized_burst, start: 30s, duration: 40s, period: 20s, offset: 10s, burst_size: 25, spread: 50ms}
    correlation: {burst_size: 0.5}
  - {name: b, input: 100, output: 5, arrival: {process: synchronized, period: 20s, offset: 10s, burst_size: 25, spread: 50ms}}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	inBurst := map[int64]int{}
	var base int
	for _, r := range rows {
		if !strings.HasPrefix(r.ID, "a-") {
			continue
		}
		off := (r.ArrivalUS - 10_000_000) % 20_000_000
		if r.InputTokens == 500 { // 100 × 25^0.5
			if off < 0 || off >= 50_000 || r.ArrivalUS < 30e6 || r.ArrivalUS >= 70e6 {
				t.Fatalf("%s: burst row at %d", r.ID, r.ArrivalUS)
			}
			inBurst[(r.ArrivalUS-10_000_000)/20_000_000]++
		} else {
			base++
		}
	}
	// Bursts at 30 s and 50 s (10 s and 70 s are outside the window).
	if len(inBurst) != 2 || inBurst[1] != 25 || inBurst[2] != 25 || base < 60 {
		t.Fatalf("bursts %v, base rows %d", inBurst, base)
	}
}
