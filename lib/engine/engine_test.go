package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/rng"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// memSink keeps results in memory.
type memSink struct{ rs []row.Result }

func (m *memSink) Write(r *row.Result) error { m.rs = append(m.rs, *r); return nil }

func (m *memSink) byID() map[string]row.Result {
	out := map[string]row.Result{}
	for _, r := range m.rs {
		out[r.ID] = r
	}
	return out
}

type memSteps struct{ ss []row.Step }

func (m *memSteps) Write(s *row.Step) error { m.ss = append(m.ss, *s); return nil }

// chunkSource streams a slice in small batches, as a sorted Arrow table would.
type chunkSource struct {
	reqs []row.Request
	n    int
}

func (c *chunkSource) Next(buf []row.Request) ([]row.Request, error) {
	if len(c.reqs) == 0 {
		return buf[:0], io.EOF
	}
	k := min(c.n, len(c.reqs))
	buf = append(buf[:0], c.reqs[:k]...)
	c.reqs = c.reqs[k:]
	return buf, nil
}

func testConfig() config.Cluster {
	c := config.Default()
	c.Engine.KVBlocks = 1000
	c.Latency = config.Latency{Mode: "linear", Beta: []float64{1000, 1, 10}}
	return c
}

func testModel(c config.Cluster) []latency.Model {
	m, ok := linearModel(&c.Latency)
	if !ok {
		panic("no linear model")
	}
	return []latency.Model{m}
}

func req(id string, arrival int64, in, out int32) row.Request {
	r := row.NewRequest(id)
	r.ArrivalUS, r.InputTokens, r.OutputTokens = arrival, in, out
	return r
}

func run(t *testing.T, c config.Cluster, reqs []row.Request, opts Options) (*memSink, Summary) {
	t.Helper()
	opts.CheckInvariants = true
	sink := &memSink{}
	sum, err := Run(c, testModel(c), SliceSource(reqs), sink, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink, sum
}

func TestSingleRequestIsSumOfSteps(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		alpha                []float64
		ttft, e2e, tpot, enq int64
	}{
		// prefill 1000+100·1 = 1100; 4 decodes of 1000+10 = 1010.
		{"no alpha", nil, 1100, 1100 + 4*1010, 1010, 0},
		// queue delay 50+1·100 = 150; α2 = 7 per streamed token on the request's own timeline.
		{"alpha", []float64{50, 1, 7}, 150 + 1100 + 7, 150 + 1100 + 4*1010 + 5*7, (4*1010 + 4*7) / 4, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Latency.Alpha = tc.alpha
			steps := &memSteps{}
			sink, _ := run(t, c, []row.Request{req("a", 0, 100, 5)}, Options{Steps: steps})
			r := sink.rs[0]
			if r.Status != row.StatusCompleted || r.TTFTUS != tc.ttft || r.E2EUS != tc.e2e || r.TPOTUS != tc.tpot || r.EnqueuedUS != tc.enq {
				t.Fatalf("got status %s ttft %d e2e %d tpot %d enq %d, want ttft %d e2e %d tpot %d enq %d",
					r.Status, r.TTFTUS, r.E2EUS, r.TPOTUS, r.EnqueuedUS, tc.ttft, tc.e2e, tc.tpot, tc.enq)
			}
			var total int64
			for _, s := range steps.ss {
				total += s.DurationUS
			}
			if len(steps.ss) != 5 || total != r.FinishedUS-r.EnqueuedUS-5*int64(len(tc.alpha)/3*7) {
				t.Fatalf("%d steps totalling %d µs, result %+v", len(steps.ss), total, r)
			}
			if r.GeneratedTokens != 5 {
				t.Fatalf("generated %d", r.GeneratedTokens)
			}
		})
	}
}

func hashes(vals ...uint64) []uint64 { return vals }

func TestPrefixCacheHit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prefix     int
		a, b       []uint64
		in         int32
		wantCached int32
	}{
		// Same block size: 4 shared blocks of 16.
		{"same block size", 16, hashes(1, 2, 3, 4, 5, 6), hashes(1, 2, 3, 4, 9, 9), 100, 64},
		// Mooncake-style 64-token hashes on 16-token engine blocks: one shared 64-token block = 4 engine blocks.
		{"coarser hashes", 64, hashes(1, 2), hashes(1, 7), 128, 64},
		// Everything shared: the last token is always recomputed, so 127 → 7 blocks.
		{"all shared", 16, hashes(1, 2, 3, 4, 5, 6, 7, 8), hashes(1, 2, 3, 4, 5, 6, 7, 8), 128, 112},
		{"nothing shared", 16, hashes(1, 2), hashes(3, 4), 32, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			a, b := req("a", 0, tc.in, 2), req("b", 1_000_000, tc.in, 2)
			a.PrefixHashes, b.PrefixHashes = tc.a, tc.b
			sink, _ := run(t, c, []row.Request{a, b}, Options{PrefixBlockSize: tc.prefix})
			got := sink.byID()
			if got["a"].CachedTokens != 0 || got["b"].CachedTokens != tc.wantCached {
				t.Fatalf("cached tokens a=%d b=%d, want 0 and %d", got["a"].CachedTokens, got["b"].CachedTokens, tc.wantCached)
			}
			// The hit shortens b's prefill by β1 per cached token.
			if d := got["a"].TTFTUS - got["b"].TTFTUS; d != int64(tc.wantCached) {
				t.Fatalf("TTFT difference %d, want %d", d, tc.wantCached)
			}
		})
	}
}

func TestKVStarvedPreemptsAndFinishes(t *testing.T) {
	c := testConfig()
	c.Engine.KVBlocks = 20 // 320 tokens; each request ends at 149 tokens (10 blocks)
	var reqs []row.Request
	for i := 0; i < 6; i++ {
		reqs = append(reqs, req(fmt.Sprint("r", i), 0, 50, 100))
	}
	steps := &memSteps{}
	sink, sum := run(t, c, reqs, Options{Steps: steps})
	if sum.Completed != 6 {
		t.Fatalf("completed %d of 6: %+v", sum.Completed, sum)
	}
	if sum.Preemptions == 0 {
		t.Fatal("expected preemptions on a KV-starved instance")
	}
	var pre int32
	for _, r := range sink.rs {
		pre += r.Preemptions
		if r.GeneratedTokens != 100 {
			t.Fatalf("%s generated %d", r.ID, r.GeneratedTokens)
		}
	}
	if int64(pre) != sum.Preemptions {
		t.Fatalf("results count %d preemptions, summary %d", pre, sum.Preemptions)
	}
	for _, s := range steps.ss {
		if s.KVBlocksUsed > s.KVBlocksTotal {
			t.Fatalf("step %d uses %d of %d blocks", s.StepIndex, s.KVBlocksUsed, s.KVBlocksTotal)
		}
	}
}

func TestNeverFitsIsDropped(t *testing.T) {
	const maxI = math.MaxInt32
	for _, tc := range []struct {
		name   string
		blocks int64
		big    row.Request
		reason string
	}{
		// 100+10−1 = 109 tokens held at most: 7 blocks of 16.
		{"plain", 4, req("big", 0, 100, 10), "needs 7 KV blocks (109 tokens), an instance has 4"},
		{"exactly one block too many", 1, req("big", 0, 16, 2), "needs 2 KV blocks (17 tokens), an instance has 1"},
		// input+output overflowed int32 and the request was admitted, then stalled.
		{"input overflows int32", 100, req("big", 0, maxI, 10), "needs 134217729 KV blocks (2147483656 tokens), an instance has 100"},
		{"output overflows int32", 100, req("big", 0, 10, maxI), "needs 134217729 KV blocks (2147483656 tokens), an instance has 100"},
		{"both near int32", 100, req("big", 0, 2_000_000_000, 2_000_000_000), "needs 250000000 KV blocks (3999999999 tokens), an instance has 100"},
		// Enough blocks, but more tokens than one request's int32 counters hold.
		{"beyond int32 with a huge cache", maxI, req("big", 0, maxI-8, 10), "needs 134217728 KV blocks (2147483648 tokens): more than 2147483631 tokens per request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Engine.KVBlocks = tc.blocks
			sink, sum := run(t, c, []row.Request{tc.big, req("small", 0, 10, 5)}, Options{})
			got := sink.byID()
			if got["big"].Status != row.StatusDropped || got["big"].DropReason != tc.reason {
				t.Fatalf("big: %s %q, want dropped %q", got["big"].Status, got["big"].DropReason, tc.reason)
			}
			if got["small"].Status != row.StatusCompleted || sum.Dropped != 1 || sum.Completed != 1 {
				t.Fatalf("small %s, summary %+v", got["small"].Status, sum)
			}
		})
	}
}

func TestDependencies(t *testing.T) {
	c := testConfig()
	a := req("a", 0, 100, 5)
	tool := row.NewRequest("tool")
	tool.Kind, tool.DependsOn, tool.DelayUS = row.KindTool, []string{"a"}, 3000
	b := row.NewRequest("b")
	b.InputTokens, b.OutputTokens, b.DependsOn, b.DelayUS = 50, 2, []string{"tool"}, 500
	big := req("big", 0, 100000, 10) // dropped: never fits
	d := row.NewRequest("d")
	d.InputTokens, d.OutputTokens, d.DependsOn = 10, 1, []string{"big", "a"}
	// Fan-in: e waits for both a and b.
	e := row.NewRequest("e")
	e.InputTokens, e.OutputTokens, e.DependsOn = 10, 1, []string{"b", "a"}
	for _, src := range []string{"slice", "stream"} {
		t.Run(src, func(t *testing.T) {
			reqs := []row.Request{a, big, tool, b, d, e}
			sink := &memSink{}
			var s Source = SliceSource(reqs)
			if src == "stream" {
				s = &chunkSource{reqs: reqs, n: 2}
			}
			if _, err := Run(c, testModel(c), s, sink, Options{CheckInvariants: true}); err != nil {
				t.Fatal(err)
			}
			got := sink.byID()
			if got["tool"].ArrivalUS != got["a"].FinishedUS || got["tool"].FinishedUS != got["a"].FinishedUS+3000 {
				t.Fatalf("tool %+v after a finished at %d", got["tool"], got["a"].FinishedUS)
			}
			if got["b"].ArrivalUS != got["tool"].FinishedUS+500 || got["b"].Status != row.StatusCompleted {
				t.Fatalf("b arrives at %d, want %d", got["b"].ArrivalUS, got["tool"].FinishedUS+500)
			}
			if got["d"].Status != row.StatusDropped || got["d"].DropReason != "dependency big dropped" {
				t.Fatalf("d: %s %q", got["d"].Status, got["d"].DropReason)
			}
			if got["e"].ArrivalUS != got["b"].FinishedUS {
				t.Fatalf("e arrives at %d, b finished at %d", got["e"].ArrivalUS, got["b"].FinishedUS)
			}
			if len(sink.rs) != 6 {
				t.Fatalf("%d results", len(sink.rs))
			}
		})
	}
}

func TestDependentArrival(t *testing.T) {
	// a finishes at 1010 (prefill 10 tokens) + 1010 (one decode) = 2020 µs.
	for _, tc := range []struct {
		name          string
		kind          string
		arrival       int64 // the dependent's own arrival_us (row.Null: none)
		delay         int64
		wantArr, want int64 // simulated arrival; finish (tool) or first token (llm)
	}{
		{"no own arrival", row.KindLLM, row.Null, 500, 2520, 2520 + 1010},
		{"own arrival before the dependency's finish", row.KindLLM, 100, 500, 2520, 2520 + 1010},
		{"own arrival inside the delay", row.KindLLM, 2300, 500, 2520, 2520 + 1010},
		// The recorded arrival already includes the think time: not added twice.
		{"own arrival after finish+delay", row.KindLLM, 9000, 500, 9000, 9000 + 1010},
		{"tool, no own arrival", row.KindTool, row.Null, 500, 2020, 2520},
		{"tool starting at its own arrival", row.KindTool, 9000, 500, 9000, 9500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := row.NewRequest("d")
			d.Kind, d.ArrivalUS, d.DelayUS, d.DependsOn = tc.kind, tc.arrival, tc.delay, []string{"a"}
			if tc.kind == row.KindLLM {
				d.InputTokens, d.OutputTokens = 10, 1
			}
			for _, stream := range []bool{false, true} {
				rows := []row.Request{req("a", 0, 10, 2), d}
				var src Source = SliceSource(rows)
				if stream {
					src = &chunkSource{reqs: rows, n: 1}
				}
				c := testConfig()
				sink := &memSink{}
				if _, err := Run(c, testModel(c), src, sink, Options{CheckInvariants: true}); err != nil {
					t.Fatal(err)
				}
				g := sink.byID()["d"]
				got := g.FirstTokenUS
				if tc.kind == row.KindTool {
					got = g.FinishedUS
				}
				if g.Status != row.StatusCompleted || g.ArrivalUS != tc.wantArr || got != tc.want {
					t.Fatalf("stream %v: %s arrival %d, end %d; want arrival %d, end %d", stream, g.Status, g.ArrivalUS, got, tc.wantArr, tc.want)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	dep := func(id string, deps ...string) row.Request {
		r := row.NewRequest(id)
		r.InputTokens, r.OutputTokens, r.DependsOn = 10, 1, deps
		return r
	}
	neg := req("neg", 0, 10, 1)
	neg.OutputTokens = -3
	for _, tc := range []struct {
		name   string
		reqs   []row.Request
		stream bool
		want   string
	}{
		{"duplicate", []row.Request{req("a", 0, 10, 1), req("a", 5, 10, 1)}, false, "row 2 (request a): column request_id: duplicate id"},
		{"duplicate streamed", []row.Request{req("a", 0, 10, 1), req("a", 5, 10, 1)}, true, "row 2 (request a): column request_id: duplicate id"},
		{"dangling", []row.Request{req("a", 0, 10, 1), dep("b", "zz")}, false, `row 2 (request b): column depends_on: "zz" not found`},
		{"cycle", []row.Request{req("a", 0, 10, 1), dep("b", "c"), dep("c", "b")}, false, "row 2 (request b): column depends_on: dependency cycle"},
		{"self", []row.Request{dep("b", "b")}, false, "dependency cycle"},
		{"negative tokens", []row.Request{req("a", 0, 10, 1), neg}, false, "row 2 (request neg): column output_tokens: expected >= 0, found -3"},
		{"negative streamed", []row.Request{req("a", 0, 10, 1), neg}, true, "row 2 (request neg): column output_tokens"},
		{"forward ref streamed", []row.Request{req("a", 0, 10, 1), dep("b", "c"), dep("c", "a")}, true, `row 2 (request b): column depends_on: "c" not found among earlier rows`},
		// Times near MaxInt64 overflowed when delays and steps were added.
		{"huge arrival", []row.Request{req("a", math.MaxInt64-1000, 10, 1)}, false, "row 1 (request a): column arrival_us: expected <= 1152921504606846976 (2^60 µs), found 9223372036854774807"},
		{"huge arrival streamed", []row.Request{req("a", 0, 10, 1), req("b", 1<<61, 10, 1)}, true, "row 2 (request b): column arrival_us: expected <= 1152921504606846976"},
		{"huge delay", []row.Request{req("a", 0, 10, 1), func() row.Request { r := dep("b", "a"); r.DelayUS = math.MaxInt64 - 10; return r }()}, true, "row 2 (request b): column delay_us: expected <= 1152921504606846976 (2^60 µs), found 9223372036854775797"},
		{"unsorted streamed", []row.Request{req("a", 50, 10, 1), req("b", 10, 10, 1)}, true, "row 2 (request b): column arrival_us: the table promises blis.sorted=arrival"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			srcs := []Source{SliceSource(tc.reqs)}
			if tc.stream {
				srcs = []Source{&chunkSource{reqs: tc.reqs, n: 1}}
			} else if !strings.HasPrefix(tc.name, "negative") {
				// The table reader rejects negative tokens itself (with
				// its own path); every other check is the engine's.
				srcs = append(srcs, TableSource(tableOf(t, tc.reqs)))
			}
			for _, src := range srcs {
				_, err := Run(c, testModel(c), src, &memSink{}, Options{Path: "in.arrow"})
				var re *row.RowError
				if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "in.arrow: ") {
					t.Fatalf("%T: got %v, want a row error containing %q", src, err, tc.want)
				}
			}
		})
	}
}

func TestSourceFailedPassesThrough(t *testing.T) {
	c := testConfig()
	f := req("f", 0, 10, 0)
	f.SourceStatus = row.SourceFailed
	child := row.NewRequest("child")
	child.InputTokens, child.OutputTokens, child.DependsOn = 10, 1, []string{"f"}
	sink, sum := run(t, c, []row.Request{f, child}, Options{})
	got := sink.byID()
	if got["f"].Status != row.StatusSourceFailed || got["child"].Status != row.StatusDropped || got["child"].DropReason != "dependency f source_failed" {
		t.Fatalf("%+v", sink.rs)
	}
	if sum.SourceFailed != 1 || sum.Dropped != 1 {
		t.Fatalf("%+v", sum)
	}
}

func TestHorizonLeavesUnfinished(t *testing.T) {
	c := testConfig()
	c.Horizon = config.Duration(3 * 1000 * 1000) // 3 ms in ns
	later := req("later", 10_000, 10, 1)
	child := row.NewRequest("child")
	child.InputTokens, child.OutputTokens, child.DependsOn = 10, 1, []string{"long"}
	for _, stream := range []bool{false, true} {
		rows := []row.Request{req("long", 0, 100, 50), req("short", 0, 10, 1), later, child, req("last", 20_000, 10, 1)}
		laterChild := row.NewRequest("laterChild")
		laterChild.InputTokens, laterChild.OutputTokens, laterChild.DependsOn = 10, 1, []string{"last"}
		rows = append(rows, laterChild)
		var src Source = SliceSource(rows)
		if stream {
			src = &chunkSource{reqs: rows, n: 1}
		}
		sink := &memSink{}
		sum, err := Run(c, testModel(c), src, sink, Options{CheckInvariants: true})
		if err != nil {
			t.Fatal(err)
		}
		checkHorizon(t, sink, sum)
	}
}

func checkHorizon(t *testing.T, sink *memSink, sum Summary) {
	t.Helper()
	got := sink.byID()
	if got["last"].DropReason != "arrives after horizon" || got["laterChild"].Status != row.StatusUnfinished || len(sink.rs) != 6 {
		t.Fatalf("%+v", sink.rs)
	}
	if got["short"].Status != row.StatusCompleted || got["long"].Status != row.StatusUnfinished ||
		got["later"].Status != row.StatusUnfinished || got["later"].DropReason != "arrives after horizon" ||
		got["child"].Status != row.StatusUnfinished {
		t.Fatalf("%+v", sink.rs)
	}
	if sum.Unfinished != 5 || sum.Completed != 1 {
		t.Fatalf("%+v", sum)
	}
	// long: prefill with short ends at 1110 µs (token 1), a decode at 2120
	// (token 2); the next step would end at 3130, after the horizon.
	if g := got["long"]; g.GeneratedTokens != 2 || g.FirstTokenUS != 1110 {
		t.Fatalf("long at the horizon: generated %d, first token %d; want 2, 1110", g.GeneratedTokens, g.FirstTokenUS)
	}
}

// resultsBytes runs the simulation into an Arrow stream.
func resultsBytes(t *testing.T, c config.Cluster, reqs []row.Request, stream bool) []byte {
	t.Helper()
	var src Source = SliceSource(reqs)
	if stream {
		src = &chunkSource{reqs: reqs, n: 7}
	}
	return resultsBytesSrc(t, c, src, Options{CheckInvariants: true})
}

// tableOf writes reqs as an Arrow stream and reads
// it back as the in-memory table blis-sim holds an unsorted input in.
func tableOf(t *testing.T, reqs []row.Request) *trace.RequestTable {
	t.Helper()
	var buf bytes.Buffer
	schema := trace.RequestsSchema(trace.NewMeta())
	out, err := trace.Create("-", &buf, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(out, schema)
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := trace.Open("-", &buf)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := trace.ReadRequestTable(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tab.Release)
	return tab
}

func resultsBytesOpts(t *testing.T, c config.Cluster, reqs []row.Request, opts Options) []byte {
	t.Helper()
	return resultsBytesSrc(t, c, SliceSource(reqs), opts)
}

func resultsBytesSrc(t *testing.T, c config.Cluster, src Source, opts Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	schema := trace.ResultsSchema(trace.NewMeta())
	out, err := trace.Create("-", &buf, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(out, schema)
	if _, err := Run(c, testModel(c), src, w, opts); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// workload is a mixed random workload: shared prefixes, sessions with tool
// calls, priorities.
func workload(seed uint64, n int) []row.Request {
	g := rng.New(seed, "test-workload")
	var reqs []row.Request
	t := int64(0)
	for i := 0; i < n; i++ {
		t += int64(g.ExpFloat64() * 20000)
		in := int32(20 + g.IntN(600))
		r := req(fmt.Sprint("s", i), t, in, int32(1+g.IntN(200)))
		r.Priority = int32(g.IntN(3))
		group := uint64(g.IntN(4))
		for j := int32(0); j < in/16; j++ {
			h := group*1000 + uint64(j)
			if j > 3 {
				h += uint64(i) * 1_000_000
			}
			r.PrefixHashes = append(r.PrefixHashes, h)
		}
		reqs = append(reqs, r)
		if g.IntN(3) == 0 { // a tool call then a follow-up turn
			tool := row.NewRequest(fmt.Sprint("s", i, "-tool"))
			tool.Kind, tool.DependsOn, tool.DelayUS = row.KindTool, []string{r.ID}, int64(g.IntN(5000))
			next := row.NewRequest(fmt.Sprint("s", i, "-next"))
			next.InputTokens, next.OutputTokens = in+100, int32(1+g.IntN(50))
			next.DependsOn, next.DelayUS = []string{r.ID, tool.ID}, int64(g.IntN(100000))
			next.PrefixHashes = r.PrefixHashes
			reqs = append(reqs, tool, next)
		}
	}
	return reqs
}

func TestDeterminismAndStreamingEquivalence(t *testing.T) {
	for _, routing := range policy.Names(policy.StageRouting) {
		t.Run(routing, func(t *testing.T) {
			c := testConfig()
			c.Replicas = 3
			c.Engine.KVBlocks = 300
			c.Router.Routing = routing
			c.SnapshotInterval = config.Duration(5_000_000) // 5 ms
			c.Engine.SchedulingPolicy = "priority"
			c.Router.Priority = "request"
			reqs := workload(7, 300)
			a := resultsBytes(t, c, reqs, false)
			b := resultsBytes(t, c, reqs, false)
			if !bytes.Equal(a, b) {
				t.Fatal("two runs differ")
			}
			s := resultsBytes(t, c, reqs, true)
			if !bytes.Equal(a, s) {
				t.Fatal("streamed run differs from in-memory run")
			}
			// An unsorted table held as Arrow batches runs as the slice does.
			shuffled := append([]row.Request(nil), reqs...)
			rng.New(1, "shuffle").Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			tb := resultsBytesSrc(t, c, TableSource(tableOf(t, shuffled)), Options{CheckInvariants: true})
			if !bytes.Equal(a, tb) {
				t.Fatal("run from a shuffled Arrow table differs from the in-memory run")
			}
		})
	}
}

func TestInvariantsUnderLoad(t *testing.T) {
	for _, kv := range []int64{60, 200, 5000} {
		for _, thr := range []int{0, 64} {
			t.Run(fmt.Sprintf("kv%d-thr%d", kv, thr), func(t *testing.T) {
				c := testConfig()
				c.Replicas = 2
				c.Engine.KVBlocks = kv
				c.Engine.LongPrefillThreshold = thr
				c.Engine.MaxNumSeqs = 16
				c.Engine.MaxNumBatchedTokens = 256
				c.Router.Routing = "least-loaded"
				c.Latency.Alpha = []float64{100, 0.5, 3}
				reqs := workload(11, 200)
				sink, sum := run(t, c, reqs, Options{})
				if int(sum.Injected) != len(reqs) || len(sink.rs) != len(reqs) {
					t.Fatalf("injected %d, results %d, rows %d", sum.Injected, len(sink.rs), len(reqs))
				}
				for _, r := range sink.rs {
					if r.Status == row.StatusDropped && !strings.Contains(r.DropReason, "KV blocks") && !strings.HasPrefix(r.DropReason, "dependency ") {
						t.Fatalf("%s dropped: %q", r.ID, r.DropReason)
					}
				}
			})
		}
	}
}

func TestRNGStreamsIndependent(t *testing.T) {
	a := rng.New(1, "arrivals")
	want := []uint64{a.Uint64(), a.Uint64(), a.Uint64()}
	a2 := rng.New(1, "arrivals")
	b := rng.New(1, "lengths")
	for i := 0; i < 1000; i++ {
		b.Uint64()
	}
	for i := range want {
		if got := a2.Uint64(); got != want[i] {
			t.Fatalf("draw %d changed after drawing from another stream", i)
		}
	}
	if rng.New(1, "x").Uint64() == rng.New(2, "x").Uint64() || rng.New(1, "x").Uint64() == rng.New(1, "y").Uint64() {
		t.Fatal("streams with different seeds or names coincide")
	}
}

func TestRoutingPolicies(t *testing.T) {
	// Two prefix groups alternating; after warm-up, prefix-affinity keeps each
	// group on one instance, round-robin alternates instances.
	var reqs []row.Request
	for i := 0; i < 40; i++ {
		r := req(fmt.Sprint("p", i), int64(i)*200_000, 160, 2)
		g := uint64(i % 2)
		for j := uint64(0); j < 10; j++ {
			r.PrefixHashes = append(r.PrefixHashes, g<<32|j)
		}
		reqs = append(reqs, r)
	}
	for _, tc := range []struct {
		routing   string
		minCached int64
	}{
		{"prefix-affinity", 38 * 144},
		{"weighted", 38 * 144},
		{"round-robin", 0},
	} {
		t.Run(tc.routing, func(t *testing.T) {
			c := testConfig()
			c.Replicas = 4
			c.Router.Routing = tc.routing
			if tc.routing == "weighted" {
				c.Router.Weights = map[string]float64{"prefix": 10, "load": 1}
			}
			_, sum := run(t, c, reqs, Options{})
			if sum.CachedTokens < tc.minCached {
				t.Fatalf("cached %d tokens, want >= %d", sum.CachedTokens, tc.minCached)
			}
		})
	}
	t.Run("least-loaded spreads a burst", func(t *testing.T) {
		c := testConfig()
		c.Replicas = 4
		c.Router.Routing = "least-loaded"
		var burst []row.Request
		for i := 0; i < 8; i++ {
			burst = append(burst, req(fmt.Sprint("b", i), 0, 100, 10))
		}
		sink, _ := run(t, c, burst, Options{})
		per := map[int32]int{}
		for _, r := range sink.rs {
			per[r.InstanceID]++
		}
		for i := int32(0); i < 4; i++ {
			if per[i] != 2 {
				t.Fatalf("per instance %v, want 2 each", per)
			}
		}
	})
}

func TestFailedAdmissionShortcutIsExact(t *testing.T) {
	c := testConfig()
	c.Replicas = 2
	c.Engine.KVBlocks = 120
	c.Engine.MaxNumBatchedTokens = 512
	c.Engine.LongPrefillThreshold = 128
	reqs := workload(5, 400)
	a := resultsBytes(t, c, reqs, false)
	sched.SkipFailed = false
	defer func() { sched.SkipFailed = true }()
	b := resultsBytes(t, c, reqs, false)
	if !bytes.Equal(a, b) {
		t.Fatal("skipping re-checks of failed admissions changed the results")
	}
}

func TestConversationReusesAnswerBlocks(t *testing.T) {
	// Turn 2's prompt is turn 1's prompt (64 tokens), its answer (40) and a
	// new message (20). Turn 1 held 64+40-1 = 103 tokens of KV: 6 full blocks,
	// which turn 2 finds cached (4 of prompt, 2 holding the answer).
	t1 := req("t1", 0, 64, 40)
	t1.PrefixHashes = hashes(1, 2, 3, 4)
	tool := row.NewRequest("tool")
	tool.Kind, tool.DependsOn, tool.DelayUS = row.KindTool, []string{"t1"}, 100
	t2 := row.NewRequest("t2")
	t2.InputTokens, t2.OutputTokens, t2.DependsOn, t2.DelayUS = 124, 5, []string{"tool"}, 1000
	t2.PrefixHashes = hashes(1, 2, 3, 4, 50, 60, 70, 80)
	other := row.NewRequest("other") // same prompt start, different continuation: not used for t1's answer
	other.InputTokens, other.OutputTokens, other.DependsOn = 124, 1, []string{"t1"}
	other.PrefixHashes = hashes(9, 9, 9, 9, 9, 9, 9, 9)
	for _, stream := range []bool{false, true} {
		c := testConfig()
		var src Source = SliceSource([]row.Request{t1, other, tool, t2})
		if stream {
			src = &chunkSource{reqs: []row.Request{t1, other, tool, t2}, n: 1}
		}
		sink := &memSink{}
		if _, err := Run(c, testModel(c), src, sink, Options{CheckInvariants: true}); err != nil {
			t.Fatal(err)
		}
		if got := sink.byID()["t2"].CachedTokens; got != 96 {
			t.Fatalf("stream=%v: turn 2 found %d cached tokens, want 96", stream, got)
		}
	}
}

func TestStreamingMemoryFollowsRequestsInFlight(t *testing.T) {
	// 20,000 sessions of two turns, one session every 50 ms, each lasting
	// well under a second: a streamed run holds a few dozen at a time.
	var reqs []row.Request
	for i := 0; i < 20000; i++ {
		a := req(fmt.Sprint("a", i), int64(i)*50_000, 100, 10)
		b := row.NewRequest(fmt.Sprint("b", i))
		b.InputTokens, b.OutputTokens, b.DependsOn, b.DelayUS = 150, 10, []string{a.ID}, 20_000
		reqs = append(reqs, a, b)
	}
	c := testConfig()
	sum, err := Run(c, testModel(c), &chunkSource{reqs: reqs, n: 4096}, &nullSink{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Completed != 40000 || sum.PeakHeld > 200 {
		t.Fatalf("completed %d, peak held %d", sum.Completed, sum.PeakHeld)
	}
	// An in-memory table is ordered as a sorted one would be and streamed
	// through the cluster: it holds only what is in flight too.
	sum, err = Run(c, testModel(c), SliceSource(reqs), &nullSink{}, Options{})
	if err != nil || sum.Completed != 40000 || sum.PeakHeld > 200 {
		t.Fatalf("in memory: %v, completed %d, peak held %d", err, sum.Completed, sum.PeakHeld)
	}
}

// lastInstance routes everything to the last replica; rejectOdd rejects
// every other request.
type lastInstance struct{}

func (lastInstance) Route(_ policy.RequestView, c *policy.ClusterView) policy.RouteDecision {
	return policy.RouteDecision{Target: c.Len() - 1, Reason: "last"}
}

type rejectOdd struct{ n int }

func (p *rejectOdd) Admit(policy.RequestView, *policy.ClusterView) policy.AdmitDecision {
	p.n++
	if p.n%2 == 1 {
		return policy.AdmitDecision{}
	}
	return policy.AdmitDecision{Verdict: policy.Reject, Reason: "odd one out"}
}

func TestCustomPolicies(t *testing.T) {
	c := testConfig()
	c.Replicas = 3
	var reqs []row.Request
	for i := 0; i < 6; i++ {
		reqs = append(reqs, req(fmt.Sprint("c", i), int64(i)*1000, 10, 2))
	}
	sink, sum := run(t, c, reqs, Options{Policies: cluster.Policies{Routing: lastInstance{}, Admission: &rejectOdd{}}})
	if sum.Rejected != 3 || sum.Completed != 3 {
		t.Fatalf("%+v", sum)
	}
	for _, r := range sink.rs {
		if r.Status == row.StatusCompleted && r.InstanceID != 2 || r.Status == row.StatusRejected && r.DropReason != "odd one out" {
			t.Fatalf("%+v", r)
		}
	}
}

// recorder is a latency model that records every batch it is asked about.
type recorder struct {
	latency.Linear
	batches []latency.Batch
}

func (m *recorder) StepTime(b *latency.Batch) int64 {
	m.batches = append(m.batches, *b)
	return m.Linear.StepTime(b)
}

func TestChunkedPrefillAggregates(t *testing.T) {
	c := testConfig()
	c.Engine.AsyncScheduling = false // b joins the step after its arrival (vLLM's synchronous scheduler)
	c.Engine.MaxNumBatchedTokens = 128
	c.Engine.MaxNumSeqs = 128
	m := &recorder{Linear: latency.Linear{Beta0: 1000, Beta1: 1, Beta2: 10}}
	// a: 300-token prompt in chunks of 128, 128, 44, then 2 decodes.
	// b arrives during a's second chunk and is admitted with the budget
	// left after a's last chunk (128 − 44 = 84 of its 100 tokens).
	a, b := req("a", 0, 300, 3), req("b", 1500, 100, 1)
	sink := &memSink{}
	if _, err := Run(c, []latency.Model{m}, SliceSource([]row.Request{a, b}), sink, Options{CheckInvariants: true}); err != nil {
		t.Fatal(err)
	}
	want := []latency.Batch{
		{PrefillSeqs: 1, PrefillTokens: 128, PrefillCtx: 0, PrefillAttn: 128 * 64},
		{PrefillSeqs: 1, PrefillTokens: 128, PrefillCtx: 128, PrefillAttn: 128 * (128 + 64)},
		{PrefillSeqs: 2, PrefillTokens: 128, PrefillCtx: 256, PrefillAttn: 44*(256+22) + 84*42},
		// a decodes its 2nd token with 301 tokens of context; b finishes its prefill.
		{PrefillSeqs: 1, PrefillTokens: 16, PrefillCtx: 84, PrefillAttn: 16 * (84 + 8), DecodeSeqs: 1, DecodeCtx: 301},
		{DecodeSeqs: 1, DecodeCtx: 302},
	}
	if len(m.batches) != len(want) {
		t.Fatalf("%d steps: %+v", len(m.batches), m.batches)
	}
	for i := range want {
		if m.batches[i] != want[i] {
			t.Fatalf("step %d: got %+v, want %+v", i, m.batches[i], want[i])
		}
	}
	got := sink.byID()
	// a's first token comes with its third step: 1128 + 1128 + 1128.
	if got["a"].TTFTUS != 3384 || got["b"].FirstScheduledUS != 2256 || got["b"].TTFTUS != 3384+1026-1500 {
		t.Fatalf("a %+v\nb %+v", got["a"], got["b"])
	}
}
