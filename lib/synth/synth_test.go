package synth

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// collect runs a spec and returns deep copies of its rows.
func collect(t testing.TB, s *Spec) ([]trace.Request, Stats) {
	t.Helper()
	var rows []trace.Request
	st, err := Generate(s, func(r *trace.Request) error {
		c := *r
		c.DependsOn = slices.Clone(r.DependsOn)
		c.PrefixHashes = slices.Clone(r.PrefixHashes)
		rows = append(rows, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, st
}

func parse(t testing.TB, yaml string) *Spec {
	t.Helper()
	s, err := Parse([]byte(yaml), "test.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkInvariants verifies what every synthesised table must satisfy.
func checkInvariants(t testing.TB, s *Spec, rows []trace.Request) {
	t.Helper()
	pos := make(map[string]int, len(rows))
	sessRoot := map[string]int64{} // session -> its root's arrival
	lastRoot := int64(-1)
	maxIter := map[string]int{}
	for _, c := range s.Clients {
		if c.plan != nil && c.plan.maxIter > 0 {
			maxIter[c.Name] = c.plan.maxIter
		}
	}
	bs := s.PrefixBlockSize
	for i := range rows {
		r := &rows[i]
		if err := r.Validate(); err != nil {
			t.Fatalf("row %d (%s): %v", i, r.ID, err)
		}
		if _, dup := pos[r.ID]; dup {
			t.Fatalf("row %d: duplicate id %s (a fan-in or step injected twice)", i, r.ID)
		}
		pos[r.ID] = i
		key := r.SessionID
		if key == "" {
			key = r.ID
		}
		if r.ArrivalUS != trace.Null {
			if r.ArrivalUS < lastRoot {
				t.Fatalf("row %d (%s): root arrival %d after a root at %d: blis.sorted=arrival broken", i, r.ID, r.ArrivalUS, lastRoot)
			}
			lastRoot = r.ArrivalUS
			if _, ok := sessRoot[key]; !ok {
				sessRoot[key] = r.ArrivalUS
			}
		} else {
			ra, ok := sessRoot[key]
			if !ok {
				t.Fatalf("row %d (%s): dependent row before any root of its session %s", i, r.ID, key)
			}
			if lastRoot > ra {
				t.Fatalf("row %d (%s): dependent row after a later-arriving root (%d > %d)", i, r.ID, lastRoot, ra)
			}
		}
		for _, d := range r.DependsOn {
			j, ok := pos[d]
			if !ok {
				t.Fatalf("row %d (%s): depends_on %s is not an earlier row", i, r.ID, d)
			}
			pk := rows[j].SessionID
			if pk == "" {
				pk = rows[j].ID
			}
			if pk != key {
				t.Fatalf("row %d (%s): depends on %s of another session", i, r.ID, d)
			}
		}
		switch r.Kind {
		case trace.KindTool:
			if r.InputTokens != 0 || r.OutputTokens != 0 || len(r.PrefixHashes) != 0 || r.Streaming {
				t.Fatalf("row %d (%s): tool row carries tokens or hashes", i, r.ID)
			}
		case trace.KindLLM:
			if want := (int(r.InputTokens) + bs - 1) / bs; len(r.PrefixHashes) != want {
				t.Fatalf("row %d (%s): %d prefix hashes for %d tokens, want %d", i, r.ID, len(r.PrefixHashes), r.InputTokens, want)
			}
			if r.OutputTokens < 1 {
				t.Fatalf("row %d (%s): output_tokens %d", i, r.ID, r.OutputTokens)
			}
		}
		if r.LoopIteration < 0 {
			t.Fatalf("row %d: negative loop_iteration", i)
		}
		for name, m := range maxIter {
			if strings.HasPrefix(r.ID, name+"-") && int(r.LoopIteration) >= m {
				t.Fatalf("row %d (%s): loop_iteration %d reaches max_iterations %d", i, r.ID, r.LoopIteration, m)
			}
		}
	}
	if s.NumRequests > 0 && int64(len(rows)) < s.NumRequests && s.Mode != ModeRate {
		t.Fatalf("%d rows, num_requests %d", len(rows), s.NumRequests)
	}
}

func TestExamples(t *testing.T) {
	names := Examples()
	if len(names) < 7 {
		t.Fatalf("built-in examples: %v", names)
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			s, err := LoadExample(n)
			if err != nil {
				t.Fatal(err)
			}
			rows, st := collect(t, s)
			if len(rows) < 100 || st.Rows != int64(len(rows)) {
				t.Fatalf("%d rows (stats %d)", len(rows), st.Rows)
			}
			checkInvariants(t, s, rows)
		})
	}
}

func TestTestdataSpecs(t *testing.T) {
	for _, f := range []string{"azure-empirical.yaml", "distributions.yaml"} {
		t.Run(f, func(t *testing.T) {
			s, err := Load(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			rows, _ := collect(t, s)
			if len(rows) < 100 {
				t.Fatalf("%d rows", len(rows))
			}
			checkInvariants(t, s, rows)
		})
	}
}

func TestAzureEmpiricalAndReplay(t *testing.T) {
	s, err := Load("testdata/azure-empirical.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := collect(t, s)
	if len(rows) != 500 {
		t.Fatalf("replayed %d arrivals, want the trace's 500", len(rows))
	}
	ctx, _ := readCSVColumn("testdata/azure2023_code_head500.csv", "ContextTokens", func(v string, _ int) (int32, error) {
		var x int32
		_, err := fmt.Sscan(v, &x)
		return x, err
	})
	for _, r := range rows {
		if !slices.Contains(ctx, r.InputTokens) {
			t.Fatalf("input %d is not a ContextTokens value of the trace", r.InputTokens)
		}
	}
	// 2023-11-16 18:17:03.9799600 -> 18:17:04.0319600 is 52 ms; speedup 2 halves it.
	if rows[0].ArrivalUS != 0 || rows[1].ArrivalUS != 26000 {
		t.Fatalf("replayed arrivals %d, %d; want 0, 26000", rows[0].ArrivalUS, rows[1].ArrivalUS)
	}
}

func writeBytes(t *testing.T, s *Spec) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(s, "-", &buf, Meta(s, []string{"test"}, nil)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDeterminism(t *testing.T) {
	for _, n := range []string{"react", "mixed-tenants", "chat-multiturn"} {
		a := writeBytes(t, mustExample(t, n))
		b := writeBytes(t, mustExample(t, n))
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two runs differ", n)
		}
		s := mustExample(t, n)
		s.Seed++
		if bytes.Equal(a, writeBytes(t, s)) {
			t.Fatalf("%s: another seed gave the same table", n)
		}
	}
}

func mustExample(t testing.TB, n string) *Spec {
	s, err := LoadExample(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Adding a client, or changing another client, leaves a client's rows unchanged.
func TestRNGPartitioning(t *testing.T) {
	base := `version: 1
seed: 5
horizon: 30s
aggregate_rate: 40
prefix_groups: [{name: sys, length: 100}]
tools: {t: {latency: {dist: exponential, mean: 0.1}, output_tokens: 30}}
clients:
  - name: chat
    rate_fraction: 0.4
    input: {dist: lognormal, mu: 5, sigma: 1}
    output: {dist: exponential, mean: 100, max: 2000}
    arrival: {process: gamma, cv: 2}
    prefix: {reuse_probability: 0.5}
    conversation: {turns: {dist: uniform, min: 1, max: 5}, think_time: {dist: exponential, mean: 2}, context_growth: accumulate}
  - name: agent
    rate_fraction: 0.2
    agentic:
      steps:
        - {id: a, type: llm_call, input: 100, output: {dist: uniform, min: 5, max: 50}, context_growth: accumulate}
        - {id: b, type: tool_call, tool: t, depends_on: [a]}
      loop: {over: [a, b], max_iterations: 4, iterations: {dist: uniform, min: 1, max: 4}}
`
	extra := `  - name: noisy
    rate_fraction: 0.3
    input: {dist: pareto, scale: 100, shape: 1.1, max: 30000}
    output: 50
    behaviour: {type: bursty, burst_probability: 0.5, burst_size: 20, burst_interval: 1ms}
`
	byClient := func(rows []trace.Request) map[string][]trace.Request {
		m := map[string][]trace.Request{}
		for _, r := range rows {
			c := r.ID[:strings.IndexByte(r.ID, '-')]
			m[c] = append(m[c], r)
		}
		return m
	}
	a := byClient(first(collect(t, parse(t, base))))
	b := byClient(first(collect(t, parse(t, base+extra))))
	for _, c := range []string{"chat", "agent"} {
		if len(a[c]) < 100 {
			t.Fatalf("%s: only %d rows", c, len(a[c]))
		}
		if fmt.Sprint(a[c]) != fmt.Sprint(b[c]) {
			t.Fatalf("client %s changed when another client was added", c)
		}
	}
	if len(b["noisy"]) == 0 {
		t.Fatal("added client produced nothing")
	}
}

func first[A, B any](a A, _ B) A { return a }

func TestBadSpecs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 15 {
		t.Fatalf("only %d bad specs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if err == nil {
				t.Fatal("accepted")
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			got := err.Error() + "\n"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
				return
			}
			want, _ := os.ReadFile(golden)
			if got != string(want) {
				t.Errorf("error\n got: %s want: %s", got, want)
			}
		})
	}
}

// Each turn's prompt starts with the previous turn's full blocks.
func TestConversationPrefixGrowth(t *testing.T) {
	s := parse(t, `version: 1
num_requests: 200
aggregate_rate: 1
prefix_groups: [{name: sys, length: 40}]
clients:
  - name: c
    input: {dist: uniform, min: 5, max: 60}
    output: {dist: uniform, min: 5, max: 60}
    prefix: {}
    conversation: {turns: 6, context_growth: accumulate}
`)
	rows, _ := collect(t, s)
	byID := map[string]*trace.Request{}
	sysHashes := rows[0].PrefixHashes[:40/16]
	for i := range rows {
		r := &rows[i]
		byID[r.ID] = r
		if !slices.Equal(r.PrefixHashes[:2], sysHashes) {
			t.Fatalf("%s does not start with the shared system prompt", r.ID)
		}
		if len(r.DependsOn) == 0 {
			continue
		}
		p := byID[r.DependsOn[0]]
		if r.InputTokens <= p.InputTokens+p.OutputTokens {
			t.Fatalf("%s: input %d does not contain the previous turn (%d+%d)", r.ID, r.InputTokens, p.InputTokens, p.OutputTokens)
		}
		full := int(p.InputTokens) / 16
		if !slices.Equal(r.PrefixHashes[:full], p.PrefixHashes[:full]) {
			t.Fatalf("%s does not share the previous turn's %d full blocks", r.ID, full)
		}
		if int(p.InputTokens)%16 != 0 && r.PrefixHashes[full] == p.PrefixHashes[full] {
			t.Fatalf("%s: a partial block matched a full one", r.ID)
		}
	}
}

func TestWorkflowStructure(t *testing.T) {
	s := mustExample(t, "tree-of-thought")
	rows, _ := collect(t, s)
	sess := map[string][]trace.Request{}
	for _, r := range rows {
		sess[r.SessionID] = append(sess[r.SessionID], r)
	}
	for id, rs := range sess {
		if len(rs) != 1+4+4+4+1 {
			t.Fatalf("%s: %d rows, want 14", id, len(rs))
		}
		for _, r := range rs {
			switch r.StepID {
			case "evaluate", "verify":
				if len(r.DependsOn) != 1 || !strings.HasSuffix(r.DependsOn[0], r.ID[len(r.ID)-3:]) {
					t.Fatalf("%s: paired fan-out depends on %v", r.ID, r.DependsOn)
				}
			case "refine":
				if len(r.DependsOn) != 4 {
					t.Fatalf("%s: fan-in on %v", r.ID, r.DependsOn)
				}
				if r.InputTokens < 800+96+4*40 {
					t.Fatalf("%s: input %d lacks the tool outputs", r.ID, r.InputTokens)
				}
			case "candidate":
				if len(r.DependsOn) != 1 {
					t.Fatalf("%s: %v", r.ID, r.DependsOn)
				}
			}
		}
	}
	// ReAct: iterations within bounds, each think after the previous iteration's observe.
	s = mustExample(t, "react")
	rows, _ = collect(t, s)
	iters := map[string]int32{}
	for _, r := range rows {
		if r.StepID == "think" && r.LoopIteration > 0 {
			want := fmt.Sprintf("%s-observe-i%d", r.SessionID, r.LoopIteration-1)
			if !slices.Equal(r.DependsOn, []string{want}) {
				t.Fatalf("%s depends on %v, want %s", r.ID, r.DependsOn, want)
			}
		}
		iters[r.SessionID] = max(iters[r.SessionID], r.LoopIteration+1)
	}
	seen := map[int32]bool{}
	for _, n := range iters {
		if n < 1 || n > 8 {
			t.Fatalf("%d iterations", n)
		}
		seen[n] = true
	}
	if len(seen) < 6 {
		t.Fatalf("iterations not drawn from 1..8: %v", seen)
	}
}

func TestClosedLoopChains(t *testing.T) {
	s := mustExample(t, "closed-loop")
	rows, _ := collect(t, s)
	if len(rows) != 2000 {
		t.Fatalf("%d rows", len(rows))
	}
	roots, perUser := 0, map[string]int{}
	for _, r := range rows {
		perUser[r.SessionID]++
		if r.ArrivalUS != trace.Null {
			roots++
			if r.ArrivalUS != 0 {
				t.Fatalf("closed-loop root at %d", r.ArrivalUS)
			}
			continue
		}
		if len(r.DependsOn) != 1 || r.DelayUS < 500000 || r.DelayUS > 2000000 {
			t.Fatalf("%s: chained on %v after %d µs", r.ID, r.DependsOn, r.DelayUS)
		}
	}
	if roots != 16 || len(perUser) != 16 {
		t.Fatalf("%d roots, %d users", roots, len(perUser))
	}
}

func TestOffline(t *testing.T) {
	s := parse(t, `version: 1
mode: offline
num_requests: 300
clients: [{name: a, input: 10, output: 10, weight: 2}, {name: b, input: 20, output: 5}]
`)
	rows, st := collect(t, s)
	for _, r := range rows {
		if r.ArrivalUS != 0 {
			t.Fatal("offline row not at t=0")
		}
	}
	if len(rows) != 300 || st.ClientRows[0] < 170 || st.ClientRows[0] > 230 {
		t.Fatalf("%d rows, mix %v", len(rows), st.ClientRows)
	}
}

// Rates, CVs and load profiles produce the counts they promise.
func TestArrivalStatistics(t *testing.T) {
	gaps := func(rows []trace.Request) (mean, cv float64) {
		var xs []float64
		for i := 1; i < len(rows); i++ {
			xs = append(xs, float64(rows[i].ArrivalUS-rows[i-1].ArrivalUS))
		}
		var s, ss float64
		for _, x := range xs {
			s += x
		}
		mean = s / float64(len(xs))
		for _, x := range xs {
			ss += (x - mean) * (x - mean)
		}
		return mean, math.Sqrt(ss/float64(len(xs))) / mean
	}
	for _, tc := range []struct {
		arrival string
		cv      float64
	}{{"{process: poisson}", 1}, {"{process: gamma, cv: 3}", 3}, {"{process: weibull, cv: 2}", 2}, {"{process: weibull, cv: 0.5}", 0.5}, {"{process: constant}", 0}} {
		s := parse(t, "version: 1\nhorizon: 1000s\naggregate_rate: 20\nclients: [{name: a, input: 10, output: 10, arrival: "+tc.arrival+"}]\n")
		rows, _ := collect(t, s)
		m, cv := gaps(rows)
		if math.Abs(m-50000)/50000 > 0.06 || math.Abs(cv-tc.cv) > 0.1*tc.cv+0.01 {
			t.Errorf("%s: mean gap %.0f µs (want 50000), cv %.2f (want %.2f)", tc.arrival, m, cv, tc.cv)
		}
	}
	count := func(profile string, from, to float64) int {
		s := parse(t, "version: 1\nhorizon: 100s\naggregate_rate: 100\nclients: [{name: a, input: 10, output: 10, load_profile: "+profile+"}]\n")
		rows, _ := collect(t, s)
		n := 0
		for _, r := range rows {
			if x := float64(r.ArrivalUS) / 1e6; x >= from && x < to {
				n++
			}
		}
		return n
	}
	within := func(name string, got int, want float64) {
		if math.Abs(float64(got)-want) > 4*math.Sqrt(want)+1 {
			t.Errorf("%s: %d arrivals, want about %.0f", name, got, want)
		}
	}
	within("step before", count("{type: step, steps: [{at: 0s, multiplier: 1}, {at: 50s, multiplier: 3}]}", 0, 50), 5000)
	within("step after", count("{type: step, steps: [{at: 0s, multiplier: 1}, {at: 50s, multiplier: 3}]}", 50, 100), 15000)
	within("spike", count("{type: spike, at: 10s, duration: 5s, multiplier: 10}", 10, 15), 5000)
	within("ramp", count("{type: ramp, from: 0, to: 2, start: 0s, end: 100s}", 0, 50), 2500)
	within("diurnal peak", count("{type: diurnal, period: 100s, min: 0, max: 2, peak_at: 50s}", 25, 75), 8183)
	within("step to zero", count("{type: step, steps: [{at: 20s, multiplier: 0}]}", 20, 100), 0)
}

func TestTenantBehaviour(t *testing.T) {
	s := mustExample(t, "mixed-tenants")
	rows, st := collect(t, s)
	// abuser: 10% share × 5 rapid fire = half the steady tenant's 60% would be 0.83×.
	if ratio := float64(st.ClientRows[2]) / float64(st.ClientRows[0]); ratio < 0.7 || ratio > 0.97 {
		t.Errorf("abuser/steady rows %.2f, want about 0.83", ratio)
	}
	var burstGaps, big int
	var prev int64 = -1
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.ID, "spiky-"):
			if prev >= 0 && r.ArrivalUS-prev == 20000 {
				burstGaps++
			}
			prev = r.ArrivalUS
		case strings.HasPrefix(r.ID, "abuser-") && r.InputTokens > 8*500:
			big++
		}
	}
	if burstGaps < 50 {
		t.Errorf("bursty tenant: %d gaps of exactly burst_interval", burstGaps)
	}
	if big < 50 {
		t.Errorf("abusive tenant: %d oversized prompts", big)
	}
}

func TestValidationAcceptsBackEdge(t *testing.T) {
	s := parse(t, `version: 1
num_requests: 50
aggregate_rate: 1
tools: {t: {latency: 0.1}}
clients:
  - name: a
    agentic:
      steps:
        - {id: think, type: llm_call, input: 10, output: 10, depends_on: [observe], context_growth: accumulate}
        - {id: act, type: tool_call, tool: t, depends_on: [think]}
        - {id: observe, type: llm_call, input: 10, output: 10, depends_on: [act]}
        - {id: final, type: llm_call, input: 10, output: 10, depends_on: [observe]}
      loop: {over: [think, act, observe], max_iterations: 3}
`)
	rows, _ := collect(t, s)
	checkInvariants(t, s, rows)
	if rows[0].StepID != "think" || rows[len(rows)-1].StepID != "final" || len(rows) < 10 {
		t.Fatalf("rows %s .. %s", rows[0].ID, rows[len(rows)-1].ID)
	}
}

// The hasher's resume-after-shared-prefix shortcut gives the same hashes as
// hashing from scratch.
func TestHasherIncremental(t *testing.T) {
	g := newRNG(1, "test")
	warm := hasher{bs: 16}
	var segs []seg
	for i := 0; i < 2000; i++ {
		switch g.r.IntN(4) {
		case 0:
			segs = segs[:0]
		case 1:
			if len(segs) > 0 {
				segs = segs[:g.r.IntN(len(segs))]
			}
		}
		for k := g.r.IntN(3); k >= 0; k-- {
			segs = append(segs, seg{id: uint64(g.r.IntN(5)), n: int32(1 + g.r.IntN(40))})
		}
		cold := hasher{bs: 16}
		want := slices.Clone(cold.hash(segs))
		if got := warm.hash(segs); !slices.Equal(got, want) {
			t.Fatalf("step %d: incremental hashes differ for %v", i, segs)
		}
	}
}

// The pipelined writer hands the encoder exactly the generated rows, in order.
func TestWriteMatchesGenerate(t *testing.T) {
	s := parse(t, benchSpec)
	s.NumRequests = 3*pipeRows + 17
	want, _ := collect(t, s)
	src, err := trace.Open("-", bytes.NewReader(writeBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Meta().Get(trace.MetaSorted) != "arrival" {
		t.Fatal("blis.sorted missing")
	}
	got, err := trace.ReadAllRequests(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows written, %d generated", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// A client's timeout lands on its llm rows (tool rows are timers).
func TestClientTimeout(t *testing.T) {
	s := parse(t, `
version: 1
num_requests: 20
aggregate_rate: 5
clients:
  - {name: impatient, input: 100, output: 10, timeout: 2.5s}
  - {name: patient, input: 100, output: 10}
`)
	rows, _ := collect(t, s)
	n := 0
	for _, r := range rows {
		want := int64(0)
		if strings.HasPrefix(r.ID, "impatient") {
			want, n = 2_500_000, n+1
		}
		if r.TimeoutUS != want {
			t.Fatalf("%s: timeout_us %d, want %d", r.ID, r.TimeoutUS, want)
		}
	}
	if n == 0 {
		t.Fatal("no impatient rows")
	}
}

// max_in_flight is the client's cap, written as blis.max_in_flight.
func TestMaxInFlight(t *testing.T) {
	spec := "version: 1\nnum_requests: 10\naggregate_rate: 5\nmax_in_flight: 8\nclients: [{name: a, input: 100, output: 10}]\n"
	s, err := Parse([]byte(spec), "s.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := Meta(s, nil, nil).Get(trace.MetaMaxInFlight); got != "8" {
		t.Fatalf("blis.max_in_flight %q", got)
	}
	if got := Meta(&Spec{PrefixBlockSize: 16}, nil, nil).Get(trace.MetaMaxInFlight); got != "" {
		t.Fatalf("no cap written as %q", got)
	}
	_, err = Parse([]byte(strings.Replace(spec, "max_in_flight: 8", "max_in_flight: -2", 1)), "s.yaml", ".")
	if err == nil || !strings.Contains(err.Error(), "s.yaml:4: max_in_flight: expected a positive number of requests (or 0 for no cap), found -2") {
		t.Fatalf("%v", err)
	}
}

// blis.prefix_unique is written exactly when no two prompts can start
// alike, and then no two rows share a first prefix hash.
func TestPrefixUniquePromise(t *testing.T) {
	head := "version: 1\nseed: 3\nnum_requests: 3000\naggregate_rate: 50\n"
	for _, tc := range []struct {
		name, spec string
		want       bool
	}{
		{"plain", head + "clients: [{name: a, input: {dist: normal, mean: 300, std: 200, min: 2, max: 4000}, output: 10}]\n", true},
		{"two clients, short prompts", head + "clients: [{name: a, input: 3, output: 5}, {name: b, input: 40, output: 5}]\n", true},
		{"turns without accumulated context", head + "clients: [{name: a, input: 100, output: 20, conversation: {turns: 4, context_growth: none}}]\n", true},
		{"images", head + "clients: [{name: a, input: 50, output: 5, multimodal: {images: 2, tokens_per_image: 600}}]\n", true},
		{"bursty", head + "clients: [{name: a, input: 100, output: 5, behaviour: {type: bursty, burst_probability: 0.5, burst_size: 20, burst_interval: 1ms}}]\n", true},
		{"prefix groups", head + "prefix_groups: [{name: sys, length: 100}]\nclients: [{name: a, input: 50, output: 5, prefix: {reuse_probability: 0.5}}]\n", false},
		{"accumulated context", head + "clients: [{name: a, input: 100, output: 20, conversation: {turns: 4, context_growth: accumulate}}]\n", false},
		{"agentic", head + `tools: {t: {latency: {dist: exponential, mean: 0.1}, output_tokens: 30}}
clients:
  - name: a
    agentic:
      steps:
        - {id: a, type: llm_call, input: 100, output: 20, context_growth: accumulate}
        - {id: b, type: tool_call, tool: t, depends_on: [a]}
      loop: {over: [a, b], max_iterations: 4}
`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := parse(t, tc.spec)
			if got := Meta(s, nil, nil).Get(trace.MetaPrefixUnique) == "true"; got != tc.want {
				t.Fatalf("blis.prefix_unique written: %v, want %v", got, tc.want)
			}
			rows, _ := collect(t, s)
			seen := map[uint64]string{}
			dup := ""
			for _, r := range rows {
				if len(r.PrefixHashes) == 0 {
					continue
				}
				if o, ok := seen[r.PrefixHashes[0]]; ok && dup == "" {
					dup = o + " and " + r.ID
				}
				seen[r.PrefixHashes[0]] = r.ID
			}
			if tc.want && dup != "" {
				t.Fatalf("promised unique first hashes, but %s share one", dup)
			}
			if !tc.want && dup == "" {
				t.Fatalf("no two rows share a first hash: the case does not test sharing")
			}
		})
	}
}
