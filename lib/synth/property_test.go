package synth

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

var errStop = errors.New("stop")

// randomSpec writes a random spec: random DAGs with fan-out and loops, random
// distributions, arrival processes, profiles, behaviours and run modes. Some
// are invalid (a loop that is not contiguous, say); the caller skips those.
func randomSpec(r *rand.Rand) string {
	var b strings.Builder
	dist := func() string {
		switch r.IntN(8) {
		case 0:
			return fmt.Sprint(1 + r.IntN(500))
		case 1:
			return fmt.Sprintf("{dist: uniform, min: 1, max: %d}", 2+r.IntN(800))
		case 2:
			return fmt.Sprintf("{dist: normal, mean: %d, std: 30, min: 1}", 50+r.IntN(400))
		case 3:
			return "{dist: lognormal, mu: 4, sigma: 1, max: 5000}"
		case 4:
			return "{dist: exponential, mean: 100}"
		case 5:
			return "{dist: pareto, scale: 20, shape: 1.5, max: 4000}"
		case 6:
			return "{dist: gamma, shape: 2, scale: 60}"
		}
		return "{dist: empirical, values: [16, 64, 256], weights: [1, 2, 1]}"
	}
	mode := []string{"rate", "rate", "offline", "concurrency"}[r.IntN(4)]
	fmt.Fprintf(&b, "version: 1\nseed: %d\nmode: %s\nnum_requests: %d\nprefix_block_size: %d\n", r.Uint64()>>1, mode, 50+r.IntN(400), []int{4, 16, 64}[r.IntN(3)])
	if mode == "rate" {
		fmt.Fprintf(&b, "aggregate_rate: %d\nhorizon: %ds\n", 1+r.IntN(100), 5+r.IntN(60))
	}
	if mode == "concurrency" {
		fmt.Fprintf(&b, "concurrency: %d\nthink_time: {dist: uniform, min: 0, max: 2}\n", 1+r.IntN(20))
	}
	b.WriteString("prefix_groups: [{name: g1, length: 100, weight: 2}, {name: g2, length: 37}]\n")
	b.WriteString("tools:\n  t1: {latency: {dist: exponential, mean: 0.2}, output_tokens: " + dist() + "}\n  t2: {latency: 0.05}\n")
	b.WriteString("clients:\n")
	for ci := 0; ci < 1+r.IntN(3); ci++ {
		fmt.Fprintf(&b, "  - name: c%d\n    tenant_id: t%d\n    streaming: %.2f\n", ci, r.IntN(2), r.Float64())
		if mode == "rate" {
			b.WriteString("    arrival: " + []string{"{process: poisson}", "{process: gamma, cv: 2}", "{process: weibull, cv: 0.7}", "{process: constant, jitter: 0.5}"}[r.IntN(4)] + "\n")
			b.WriteString("    load_profile: " + []string{"{type: step, steps: [{at: 1s, multiplier: 2}]}", "{type: ramp, from: 0.1, to: 2, start: 0s, end: 10s}", "{type: diurnal, period: 20s, min: 0, max: 2}", "{type: spike, at: 2s, duration: 1s, multiplier: 5}"}[r.IntN(4)] + "\n")
			b.WriteString("    behaviour: " + []string{"normal", "{type: bursty, burst_probability: 0.2, burst_size: 5, burst_interval: 10ms}", "{type: abusive, rate_multiplier: 3, oversize_probability: 0.5, oversize_factor: 4}"}[r.IntN(3)] + "\n")
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, "    prefix: {reuse_probability: %.2f}\n", r.Float64())
		}
		kind := r.IntN(3)
		if kind < 2 {
			// Issue-19 keys on chat and completion clients.
			if r.IntN(3) == 0 {
				b.WriteString("    reasoning: {chain_length: " + dist() + ", tokens_per_step: " + dist() + "}\n")
			}
			if r.IntN(3) == 0 {
				b.WriteString("    multimodal: {images: {dist: empirical, values: [0, 1, 3]}, tokens_per_image: " + dist() + "}\n")
			}
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, "    priority: {dist: uniform, min: -2, max: %d}\n", r.IntN(5))
			}
			corr := []string{}
			if r.IntN(3) == 0 {
				corr = append(corr, fmt.Sprintf("output_spread: %.2f", r.Float64()))
			}
			if kind == 1 && r.IntN(3) == 0 {
				corr = append(corr, fmt.Sprintf("prompt_growth: %.2f", r.Float64()))
				fmt.Fprintf(&b, "    conversational_probability: %.2f\n", r.Float64())
			}
			if len(corr) > 0 {
				b.WriteString("    correlation: {" + strings.Join(corr, ", ") + "}\n")
			}
		}
		switch kind {
		case 0:
			b.WriteString("    input: " + dist() + "\n    output: " + dist() + "\n")
		case 1:
			b.WriteString("    input: " + dist() + "\n    output: " + dist() + "\n")
			fmt.Fprintf(&b, "    conversation: {turns: {dist: uniform, min: 1, max: %d}, think_time: {dist: exponential, mean: 1}, context_growth: %s}\n", 1+r.IntN(8), []string{"accumulate", "none"}[r.IntN(2)])
		default:
			n := 1 + r.IntN(7)
			loopStart, loopLen := r.IntN(n), 1+r.IntN(3)
			b.WriteString("    agentic:\n      steps:\n")
			for i := 0; i < n; i++ {
				inLoop := i >= loopStart && i < loopStart+loopLen
				fmt.Fprintf(&b, "        - {id: s%d", i)
				if r.IntN(3) == 0 && i > 0 {
					fmt.Fprintf(&b, ", type: tool_call, tool: t%d", 1+r.IntN(2))
				} else {
					b.WriteString(", type: llm_call, input: " + dist() + ", output: " + dist())
					if inLoop && r.IntN(2) == 0 {
						b.WriteString(", context_growth: accumulate")
					}
				}
				if r.IntN(3) == 0 {
					fmt.Fprintf(&b, ", fan_out: %d", 2+r.IntN(3))
				}
				if i > 0 {
					deps := []string{fmt.Sprintf("s%d", i-1)}
					if i > 1 && r.IntN(3) == 0 {
						deps = append(deps, fmt.Sprintf("s%d", r.IntN(i-1)))
					}
					fmt.Fprintf(&b, ", depends_on: [%s]", strings.Join(deps, ", "))
				}
				b.WriteString("}\n")
			}
			var over []string
			for i := loopStart; i < min(n, loopStart+loopLen); i++ {
				over = append(over, fmt.Sprintf("s%d", i))
			}
			fmt.Fprintf(&b, "      loop: {over: [%s], max_iterations: %d, iterations: {dist: uniform, min: 1, max: 5}}\n", strings.Join(over, ", "), 1+r.IntN(5))
		}
	}
	return b.String()
}

func TestPropertyRandomSpecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	valid := 0
	for i := 0; i < 300; i++ {
		src := randomSpec(r)
		s, err := Parse([]byte(src), fmt.Sprintf("random-%d.yaml", i), "")
		if err != nil {
			if !strings.Contains(err.Error(), "random-") {
				t.Fatalf("error without the file name: %v", err)
			}
			continue
		}
		valid++
		rows, _ := collect(t, s)
		if len(rows) == 0 && s.Mode != ModeRate {
			t.Fatalf("spec %d made no rows:\n%s", i, src)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Log(src)
				}
			}()
			checkInvariants(t, s, rows)
		})
	}
	if valid < 150 {
		t.Fatalf("only %d of 300 random specs were valid: the generator is off", valid)
	}
}

// FuzzParse: no spec, however malformed, panics the parser or the generator.
func FuzzParse(f *testing.F) {
	for _, n := range Examples() {
		b, _ := ExampleSource(n)
		f.Add(b)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5; i++ {
		f.Add([]byte(randomSpec(r)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml", "")
		if err != nil {
			return
		}
		if s.NumRequests == 0 || s.NumRequests > 2000 {
			s.NumRequests = 2000
		}
		// Bound the work: a mutated spec may ask for enormous sessions.
		var rows []trace.Request
		var tokens int64
		_, err = Generate(s, func(r *trace.Request) error {
			tokens += int64(r.InputTokens)
			if len(rows) > 300 || tokens > 1e6 {
				return errStop
			}
			c := *r
			c.DependsOn = slices.Clone(r.DependsOn)
			c.PrefixHashes = slices.Clone(r.PrefixHashes)
			rows = append(rows, c)
			return nil
		})
		if err != nil && err != errStop && !strings.Contains(err.Error(), "above the limit") {
			t.Fatal(err)
		}
		if err == nil {
			checkInvariants(t, s, rows)
		}
	})
}

// FuzzReplayColumn: the CSV readers behind empirical columns and replayed
// timestamps return errors, never panic, on any file.
func FuzzReplayColumn(f *testing.F) {
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,3180,8\n"))
	f.Add([]byte("t,x\n1.5,2\n0.5,3\n"))
	f.Add([]byte("t\n\"2024-05-12T00:00:01Z\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "trace.csv")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Spec{file: "fuzz.yaml", dir: dir}
		for _, col := range []string{"TIMESTAMP", "t", "ContextTokens", "x"} {
			if ts, err := s.readTimes(&Arrival{Path: "trace.csv", Column: col, Speedup: 1}, nil, "client"); err == nil {
				for i := 1; i < len(ts); i++ {
					if ts[i] < ts[i-1] || ts[0] != 0 {
						t.Fatalf("replayed times not sorted from 0: %v", ts[:i+1])
					}
				}
			}
			d := &Dist{Kind: "empirical", Path: "trace.csv", Column: col}
			if err := s.compileDist(d, nil, "input"); err == nil {
				d.Sample(newRNG(1, "x"))
			}
		}
	})
}
