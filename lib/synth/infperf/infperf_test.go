package infperf

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden")

func load(t *testing.T, name string, opts Options) *Table {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !Looks(b) {
		t.Fatalf("%s: not recognised as an inference-perf config", name)
	}
	c, err := Parse(b, name)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := c.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tab.Requests {
		if err := tab.Requests[i].Validate(); err != nil {
			t.Fatalf("%s row %d: %v", name, i, err)
		}
	}
	return tab
}

func byStage(rs []trace.Request) map[string][]trace.Request {
	m := map[string][]trace.Request{}
	for _, r := range rs {
		m[r.Stage] = append(m[r.Stage], r)
	}
	return m
}

// The resolved config of a two-stage shared-prefix run: int(rate ×
// duration) requests per stage, each spread over its stage (the last at
// its end), the second stage after the first's last send, 100 distinct
// prompts cycled from prompt 0 in each stage, the workers' cap and
// aiohttp's timeout.
func TestResolvedSharedPrefix(t *testing.T) {
	tab := load(t, "resolved-general.yaml", Options{})
	st := byStage(tab.Requests)
	if len(st["0"]) != 4800 || len(st["1"]) != 12000 || len(tab.Requests) != 16800 {
		t.Fatalf("stages: %d, %d requests", len(st["0"]), len(st["1"]))
	}
	if tab.MaxInFlight != 224*100 {
		t.Errorf("cap %d", tab.MaxInFlight)
	}
	last0 := st["0"][len(st["0"])-1].ArrivalUS
	if last0 != 600_000_000 || st["1"][0].ArrivalUS <= last0+2_000_000 || st["1"][len(st["1"])-1].ArrivalUS != last0+2_000_000+600_000_000 {
		t.Errorf("stage times: stage 0 ends %d, stage 1 from %d to %d", last0, st["1"][0].ArrivalUS, st["1"][len(st["1"])-1].ArrivalUS)
	}
	for _, s := range st {
		for i := 1; i < len(s); i++ {
			if s[i].ArrivalUS < s[i-1].ArrivalUS {
				t.Fatalf("%s: arrivals out of order", s[i].ID)
			}
		}
	}
	r0 := st["0"][0]
	if r0.InputTokens != 547 || r0.OutputTokens != 248 || r0.TimeoutUS != DefaultTimeoutS*1e6 || !r0.Streaming || r0.RequestType != trace.TypeCompletion {
		t.Errorf("first request %+v", r0)
	}
	// Request n and n+100 send the same prompt: the same hashes, so the
	// second hits the prefix cache in full.
	for _, s := range st {
		for i := 0; i+100 < len(s); i += 997 {
			if !reflect.DeepEqual(s[i].PrefixHashes, s[i+100].PrefixHashes) {
				t.Fatalf("%s and %s: different prompts", s[i].ID, s[i+100].ID)
			}
		}
	}
	if !reflect.DeepEqual(st["0"][7].PrefixHashes, st["1"][7].PrefixHashes) {
		t.Error("each stage starts at prompt 0 again")
	}
	// Ten groups share their system prompt: 6 full blocks of 100 tokens.
	shared := map[uint64]int{}
	for _, r := range st["0"][:100] {
		shared[r.PrefixHashes[5]]++
		if len(r.PrefixHashes) != (547+15)/16 {
			t.Fatalf("%s: %d hashes", r.ID, len(r.PrefixHashes))
		}
	}
	if len(shared) != 10 {
		t.Errorf("%d distinct system prompts, want 10", len(shared))
	}
	distinct := map[uint64]bool{}
	for _, r := range st["0"][:100] {
		distinct[r.PrefixHashes[len(r.PrefixHashes)-1]] = true
	}
	if len(distinct) != 100 {
		t.Errorf("%d distinct prompts, want 100", len(distinct))
	}
	md := tab.Meta(trace.NewMeta())
	if md.Get(trace.MetaMaxInFlight) != "22400" || md.Get(trace.MetaSorted) != "arrival" || md.Get(trace.MetaPrefixBlockSize) != "16" {
		t.Errorf("metadata: cap %q sorted %q block %q", md.Get(trace.MetaMaxInFlight), md.Get(trace.MetaSorted), md.Get(trace.MetaPrefixBlockSize))
	}
	if len(tab.Notes) != 2 {
		t.Errorf("notes: %q", tab.Notes)
	}
}

// Same seed, same table; another seed, other draws with the same shape.
func TestDeterministic(t *testing.T) {
	a := load(t, "random-poisson.yaml", Options{Seed: 1})
	b := load(t, "random-poisson.yaml", Options{Seed: 1})
	c := load(t, "random-poisson.yaml", Options{Seed: 2})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different tables")
	}
	if reflect.DeepEqual(a.Requests, c.Requests) || len(a.Requests) != len(c.Requests) {
		t.Fatal("another seed: the same draws, or another count")
	}
}

// Random data and Poisson stages: lengths drawn from the distributions
// (clipped), about rate requests a second, the config's timeout and cap.
func TestRandomPoisson(t *testing.T) {
	tab := load(t, "random-poisson.yaml", Options{Seed: 3})
	st := byStage(tab.Requests)
	if len(st["0"]) != 600 || len(st["1"]) != 2400 {
		t.Fatalf("stages %d, %d", len(st["0"]), len(st["1"]))
	}
	if tab.MaxInFlight != 256 || tab.Requests[0].TimeoutUS != 60_000_000 {
		t.Errorf("cap %d, timeout %d", tab.MaxInFlight, tab.Requests[0].TimeoutUS)
	}
	for name, rate := range map[string]float64{"0": 5, "1": 20} {
		s := st[name]
		span := float64(s[len(s)-1].ArrivalUS-s[0].ArrivalUS) / 1e6
		if got := float64(len(s)-1) / span; math.Abs(got/rate-1) > 0.1 {
			t.Errorf("stage %s: %.2f req/s, want %g", name, got, rate)
		}
	}
	var in, out float64
	for _, r := range tab.Requests {
		if r.InputTokens < 100 || r.InputTokens > 2000 || r.OutputTokens < 10 || r.OutputTokens > 500 {
			t.Fatalf("%s: %d/%d tokens outside the distributions' bounds", r.ID, r.InputTokens, r.OutputTokens)
		}
		if len(r.PrefixHashes) != 0 {
			t.Fatalf("%s: random prompts share nothing", r.ID)
		}
		in += float64(r.InputTokens)
		out += float64(r.OutputTokens)
	}
	n := float64(len(tab.Requests))
	if math.Abs(in/n/800-1) > 0.05 || math.Abs(out/n/200-1) > 0.1 {
		t.Errorf("mean lengths %.0f / %.0f, want about 800 / 200", in/n, out/n)
	}
	// Each stage reads the lengths from index 0 again.
	if st["0"][5].InputTokens != st["1"][5].InputTokens {
		t.Error("stage 1 does not restart the data generator's index")
	}
}

// Multi-turn chat (inference-perf's own input form, aliases included):
// each user sends its next round when the last ended (depends_on) and not
// before its scheduled time (arrival_us); its prompt is the session so far
// (the group's system prompt, every earlier prompt and answer) and the new
// prompt, so each round's hashes extend the last round's prompt and answer.
func TestMultiTurn(t *testing.T) {
	tab := load(t, "profile-multiturn.json", Options{})
	if tab.MaxInFlight != 8 || len(tab.Requests) != 50 {
		t.Fatalf("cap %d, %d requests", tab.MaxInFlight, len(tab.Requests))
	}
	bySession := map[string][]trace.Request{}
	for _, r := range tab.Requests {
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	if len(bySession) != 6 {
		t.Fatalf("%d sessions, want 3 groups × 2 users", len(bySession))
	}
	for id, rs := range bySession {
		for k, r := range rs {
			if r.ArrivalUS == trace.Null || int(r.LoopIteration) != k {
				t.Fatalf("%s: round %d: %+v", id, k, r)
			}
			if k == 0 {
				if len(r.DependsOn) != 0 || r.InputTokens != 30+30+50 {
					t.Fatalf("%s first round: %+v", id, r)
				}
				continue
			}
			prev := rs[k-1]
			if !reflect.DeepEqual(r.DependsOn, []string{prev.ID}) {
				t.Fatalf("%s: depends on %v, want %s", r.ID, r.DependsOn, prev.ID)
			}
			if r.InputTokens != prev.InputTokens+prev.OutputTokens+80 {
				t.Fatalf("%s: %d prompt tokens after %d + %d", r.ID, r.InputTokens, prev.InputTokens, prev.OutputTokens)
			}
			full := int(prev.InputTokens) / BlockSize // the last round's prompt, its full blocks
			if !reflect.DeepEqual(r.PrefixHashes[:full], prev.PrefixHashes[:full]) || len(r.PrefixHashes) != (int(r.InputTokens)+BlockSize-1)/BlockSize {
				t.Fatalf("%s: does not extend its session's last round", r.ID)
			}
		}
	}
	if md := tab.Meta(trace.NewMeta()); md.Get(trace.MetaSorted) != "" {
		t.Error("a table whose rounds depend on earlier rows cannot promise arrival order")
	}
}

// A concurrent stage: num_requests over one second, capped at the level.
func TestConcurrent(t *testing.T) {
	tab := load(t, "concurrent.yaml", Options{})
	if len(tab.Requests) != 400 || tab.MaxInFlight != 16 {
		t.Fatalf("%d requests, cap %d", len(tab.Requests), tab.MaxInFlight)
	}
	if last := tab.Requests[len(tab.Requests)-1].ArrivalUS; last != 1_000_000 {
		t.Errorf("last send %d µs, want 1 s", last)
	}
	for _, r := range tab.Requests {
		if r.OutputTokens != 128 || r.InputTokens < 64+100 || r.InputTokens > 256+500 {
			t.Fatalf("%s: %d/%d", r.ID, r.InputTokens, r.OutputTokens)
		}
	}
}

// What cannot be honoured is an error naming the file, line and key.
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 10 {
		t.Fatalf("%d bad configs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, _ := os.ReadFile(f)
			name := filepath.Base(f)
			c, err := Parse(b, name)
			if err == nil {
				_, err = c.Generate(Options{})
			}
			if err == nil {
				t.Fatal("accepted")
			}
			got := err.Error() + "\n"
			if !strings.HasPrefix(got, name+":") {
				t.Errorf("error does not name the file: %s", got)
			}
			g := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				os.WriteFile(g, []byte(got), 0o644)
				return
			}
			want, _ := os.ReadFile(g)
			if got != string(want) {
				t.Errorf("got  %swant %s", got, want)
			}
		})
	}
}

// An inference-perf config is told from a BLIS spec by its keys.
func TestLooks(t *testing.T) {
	for in, want := range map[string]bool{
		"version: 1\nclients: []\n":     false,
		"load: {stages: []}\n":          true,
		`{"data":{"type":"random"}}`:    true,
		"version: 1\nload: {}\n":        false,
		"- a\n- b\n":                    false,
		"seed: 3\naggregate_rate: 2\n":  false,
		"data: {type: shared_prefix}\n": true,
		"::: not yaml\n\t- [":           false,
	} {
		if got := Looks([]byte(in)); got != want {
			t.Errorf("Looks(%q) = %v", in, got)
		}
	}
}

// Parsing and generating any input never panics; errors name the file.
func FuzzInferencePerf(f *testing.F) {
	for _, n := range []string{"resolved-general.yaml", "profile-multiturn.json", "random-poisson.yaml", "concurrent.yaml"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(b)
	}
	f.Add([]byte("load: {stages: [{rate: 1e9, duration: 1e9}]}\ndata: {type: shared_prefix}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		// Keep generation small: the fuzzer explores the config space,
		// not the size of a table.
		if c.Load != nil {
			n := 0.0
			for _, s := range c.Load.Stages {
				if s.Rate != nil && s.Duration != nil {
					n += *s.Rate * *s.Duration
				}
				if s.NumRequests != nil {
					n += float64(*s.NumRequests)
				}
			}
			if n > 5000 {
				return
			}
		}
		if d := c.Data; d != nil && d.SharedPrefix != nil {
			for _, p := range []*int{d.SharedPrefix.NumGroups, d.SharedPrefix.NumPromptsPerGroup, d.SharedPrefix.NumUniqueSystemPrompts, d.SharedPrefix.NumUsersPerSystemPrompt} {
				if p != nil && *p > 1000 {
					return
				}
			}
		}
		tab, err := c.Generate(Options{Seed: 1})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") && !strings.HasPrefix(err.Error(), "input scale") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		for i := range tab.Requests {
			if err := tab.Requests[i].Validate(); err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
	})
}

// Every inference-perf block in docs/workload.md generates.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "workload.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml inference-perf\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("no inference-perf block in docs/workload.md")
	}
	for i, b := range blocks {
		c, err := Parse(b[1], "docs block")
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if _, err := c.Generate(Options{}); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
	}
}
