package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blis-sim/blis/internal/loadavg"
	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/trace"
)

// writeTable writes reqs as a requests table; sorted marks it
// blis.sorted=arrival (the rows must then be in that order).
func writeTable(t *testing.T, reqs []trace.Request, sorted bool, blockSize int) string {
	t.Helper()
	md := trace.NewMeta()
	if sorted {
		md.Set(trace.MetaSorted, "arrival")
	}
	if blockSize > 0 {
		md.Set(trace.MetaPrefixBlockSize, fmt.Sprint(blockSize))
	}
	p := filepath.Join(t.TempDir(), "requests.arrow")
	s := trace.RequestsSchema(md)
	sink, err := trace.Create(p, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, s)
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func llm(id string, arrival int64, in, out int32) trace.Request {
	r := trace.NewRequest(id)
	r.ArrivalUS, r.InputTokens, r.OutputTokens = arrival, in, out
	return r
}

func dep(id string, delay int64, in, out int32, parents ...string) trace.Request {
	r := trace.NewRequest(id)
	r.DependsOn, r.DelayUS, r.InputTokens, r.OutputTokens = parents, delay, in, out
	return r
}

type collector struct {
	mu  sync.Mutex
	res []trace.Result
	ch  []trace.Chunk
}

func (c *collector) Write(r *trace.Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res = append(c.res, *r)
	return nil
}

type chunkCollector struct{ c *collector }

func (c chunkCollector) Write(x *trace.Chunk) error {
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	c.c.ch = append(c.c.ch, *x)
	return nil
}

func (c *collector) byID() map[string]trace.Result {
	m := map[string]trace.Result{}
	for _, r := range c.res {
		m[r.ID] = r
	}
	return m
}

// session runs the table at path against srv with opts (Results filled in).
func session(t *testing.T, srv *fakellm.Server, api API, path string, opts Options) (Summary, *collector, *Session) {
	t.Helper()
	tab, err := OpenTable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	st, err := tab.Check(opts.Limit, max(opts.Warmup, 1))
	if err != nil {
		t.Fatal(err)
	}
	hc := NewHTTPClient(max(opts.Concurrency, 64))
	tg := Target{URL: srv.URL0(), API: api}
	pr, err := Probe(context.Background(), hc, tg, ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	tg.Model, tg.Ext = pr.Model, pr.Ext
	c := &collector{}
	opts.Results = c
	if opts.Chunks == nil {
		opts.Chunks = chunkCollector{c}
	}
	if opts.Prompts.Hi == 0 {
		opts.Prompts = Prompts{Seed: 1, BlockSize: max(tab.PrefixBlockSize, 16), Lo: DefaultTokenLo, Hi: DefaultTokenHi}
	}
	s := NewSession(tab, &st, &tg, hc, opts)
	if opts.Warmup > 0 {
		if _, err := s.Warmup(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != int64(len(c.res)) {
		t.Fatalf("summary counts %d rows, %d written", sum.Rows, len(c.res))
	}
	if got := sum.Completed + sum.Failed + sum.Rejected + sum.TimedOut + sum.Dropped + sum.Unfinished + sum.SourceFailed; got != sum.Rows {
		t.Fatalf("statuses add up to %d, rows %d", got, sum.Rows)
	}
	return sum, c, s
}

// The client's TTFT is the server's delay plus loopback and parsing: within
// 1 ms with 64 requests in flight. The server runs in this process, on the
// same cores, and its own timers are late on a busy machine, so the client
// is held to what the server actually did (its first chunk written minus
// the request received, from the server's log); the error against the
// configured delay is logged. An attempt passes when 90% of its requests
// are within 1 ms; the test fails when none of five does — unless the
// machine is overloaded (1-minute load average above twice its cores),
// where no wall-clock precision is measurable and the test says so.
func TestTTFTPrecisionAtConcurrency64(t *testing.T) {
	if raceEnabled {
		t.Skip("timing precision is not measurable under the race detector")
	}
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the timing tests on their own, after the others")
	}
	const ttft = 100 * time.Millisecond
	var last string
	for attempt := 1; attempt <= 5; attempt++ {
		e := ttftErrors(t, ttft)
		last = fmt.Sprintf("TTFT − the server's actual first chunk, 400 requests, 64 in flight: p50 %.0f µs, p90 %.0f µs, p99 %.0f µs, max %.0f µs (against the configured %v: p50 %.0f, p90 %.0f µs)",
			e.p50, e.p90, e.p99, e.max, ttft, e.cfgP50, e.cfgP90)
		t.Logf("attempt %d: %s", attempt, last)
		if e.p90 <= 1000 {
			return
		}
	}
	if l, over := loadavg.Overloaded(); over {
		t.Skipf("machine overloaded (load average %.1f on %d cores): no attempt had 90%% of TTFTs within 1 ms; last: %s", l, runtime.NumCPU(), last)
	}
	t.Errorf("no attempt had 90%% of TTFTs within 1 ms of the server's first chunk; last: %s", last)
}

type ttftErr struct{ p50, p90, p99, max, cfgP50, cfgP90 float64 }

func ttftErrors(t *testing.T, ttft time.Duration) ttftErr {
	srv := fakellm.New(fakellm.Config{TTFT: ttft, ITL: 10 * time.Millisecond})
	defer srv.Close()
	var reqs []trace.Request
	const n = 400
	// 140 ms per request at one every 2.2 ms: 64 in flight.
	for i := 0; i < n; i++ {
		reqs = append(reqs, llm(fmt.Sprintf("r%03d", i), int64(i)*2200, 64, 4))
	}
	sum, c, s := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingTrace, Concurrency: 64, Warmup: 64})
	if sum.Completed != n {
		t.Fatalf("completed %d of %d: %+v", sum.Completed, n, sum.Reasons)
	}
	if m := srv.MaxInFlight(); m != 64 {
		t.Errorf("server saw at most %d requests at once, want 64", m)
	}
	log := srv.Requests()
	var errs, cfg []float64
	for _, r := range c.res {
		client := time.Duration(r.TTFTUS) * time.Microsecond
		if client < ttft {
			t.Fatalf("%s: TTFT %d µs is below the server's %v", r.ID, r.TTFTUS, ttft)
		}
		x := requestOf(t, log, s.opts.Prompts, &reqs[indexOf(reqs, r.ID)])
		server := x.FirstToken.Sub(x.Received)
		if client < server {
			t.Fatalf("%s: TTFT %v is below what the server took, %v", r.ID, client, server)
		}
		errs = append(errs, float64((client - server).Microseconds()))
		cfg = append(cfg, float64((client - ttft).Microseconds()))
		if r.GeneratedTokens != 4 {
			t.Errorf("%s: %d tokens", r.ID, r.GeneratedTokens)
		}
	}
	sort.Float64s(errs)
	sort.Float64s(cfg)
	q := func(xs []float64, p int) float64 { return xs[len(xs)*p/100] }
	return ttftErr{p50: q(errs, 50), p90: q(errs, 90), p99: q(errs, 99), max: errs[len(errs)-1], cfgP50: q(cfg, 50), cfgP90: q(cfg, 90)}
}

// requestOf finds the server's record of a row by its prompt.
func requestOf(t *testing.T, log []fakellm.Request, p Prompts, r *trace.Request) fakellm.Request {
	t.Helper()
	want := p.AppendIDs(nil, r)
	for _, x := range log {
		if len(x.Prompt) == len(want) && equalIDs(x.Prompt, want) {
			return x
		}
	}
	t.Fatalf("the server never received %s", r.ID)
	return fakellm.Request{}
}

func equalIDs(a, b []uint32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Sessions and agentic steps: a dependent reaches the server only after
// each of its dependencies' streams ended, plus its delay; a tool step is
// a timer; fan-in waits for the last branch.
func TestDependentsAfterParents(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 20 * time.Millisecond, ITL: 2 * time.Millisecond})
	defer srv.Close()
	tool := trace.NewRequest("s1-tool")
	tool.Kind, tool.DependsOn, tool.DelayUS = trace.KindTool, []string{"s1-a"}, 15000
	reqs := []trace.Request{
		llm("s1-a", 0, 100, 5),
		dep("s1-b", 10000, 120, 3, "s1-a"),
		tool,
		dep("s1-c", 0, 150, 2, "s1-tool", "s1-b"), // fan-in
		llm("s2-a", 5000, 80, 4),
		dep("s2-b", 30000, 90, 4, "s2-a"),
		dep("s2-c", 0, 95, 4, "s2-b"),
	}
	for _, timing := range []Timing{TimingTrace, TimingPoisson, TimingOffline} {
		t.Run(timing.String(), func(t *testing.T) {
			sum, c, s := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: timing, Rate: 50, Seed: 3})
			if sum.Completed != int64(len(reqs)) {
				t.Fatalf("completed %d of %d: %+v", sum.Completed, len(reqs), sum.Reasons)
			}
			res := c.byID()
			log := srv.Requests()
			for _, r := range reqs {
				got := res[r.ID]
				for _, d := range r.DependsOn {
					p := res[d]
					delay := r.DelayUS
					if r.Kind == trace.KindTool {
						delay = 0 // a tool step starts at once and lasts its delay
					}
					if got.ArrivalUS < p.FinishedUS+delay {
						t.Errorf("%s arrived at %d µs, before %s finished (%d µs) + delay %d µs", r.ID, got.ArrivalUS, d, p.FinishedUS, r.DelayUS)
					}
					if r.Kind == trace.KindTool || reqs[indexOf(reqs, d)].Kind == trace.KindTool {
						continue
					}
					// The server's view: the parent's stream had ended.
					me, parent := requestOf(t, log, s.opts.Prompts, &r), requestOf(t, log, s.opts.Prompts, &reqs[indexOf(reqs, d)])
					if !me.Received.After(parent.Done.Add(time.Duration(r.DelayUS) * time.Microsecond)) {
						t.Errorf("the server got %s %v after %s ended, want more than its delay %d µs", r.ID, me.Received.Sub(parent.Done), d, r.DelayUS)
					}
				}
			}
			tl := res["s1-tool"]
			if tl.FinishedUS-tl.ArrivalUS != 15000 || tl.ArrivalUS < res["s1-a"].FinishedUS {
				t.Errorf("tool step: arrival %d finish %d, want 15 ms after s1-a finished at %d", tl.ArrivalUS, tl.FinishedUS, res["s1-a"].FinishedUS)
			}
			fanIn := res["s1-c"]
			if fanIn.ArrivalUS < max(res["s1-tool"].FinishedUS, res["s1-b"].FinishedUS) {
				t.Errorf("fan-in s1-c arrived at %d before its last dependency finished", fanIn.ArrivalUS)
			}
		})
	}
}

func indexOf(reqs []trace.Request, id string) int {
	for i := range reqs {
		if reqs[i].ID == id {
			return i
		}
	}
	return -1
}

// The three schedules put roots where they belong: at arrival_us (scaled),
// on a Poisson stream, all at t=0, or N at a time in a closed loop.
func TestSchedulers(t *testing.T) {
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the timing tests on their own, after the others")
	}
	srv := fakellm.New(fakellm.Config{TTFT: 5 * time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	var reqs []trace.Request
	for i := 0; i < 40; i++ {
		reqs = append(reqs, llm(fmt.Sprintf("r%02d", i), int64(i)*10000, 32, 3))
	}
	path := writeTable(t, reqs, true, 0)
	lagOK := func(t *testing.T, sum Summary) {
		t.Helper()
		if p := sum.IssueLag.ValueAtQuantile(50); p > 1000 && !raceEnabled {
			// sent − due counts a session loop that woke late: on a
			// machine loaded past twice its cores that is the machine.
			if l, over := loadavg.Overloaded(); over {
				t.Logf("median issue lag %d µs, machine overloaded (load average %.1f on %d cores)", p, l, runtime.NumCPU())
				return
			}
			t.Errorf("median issue lag %d µs", p)
		}
	}

	// Never early, in any attempt; on time within 5 ms in at least one of
	// three, since one descheduling of this process on a shared CI machine
	// makes a single request late without saying anything about the scheduler.
	t.Run("trace", func(t *testing.T) {
		var late string
		for attempt := 1; attempt <= 3; attempt++ {
			sum, c, _ := session(t, srv, Completions, path, Options{Timing: TimingTrace, Speedup: 2})
			lagOK(t, sum)
			late = ""
			for _, r := range c.res {
				want := reqs[indexOf(reqs, r.ID)].ArrivalUS / 2
				d := r.ArrivalUS - want
				if d < 0 {
					t.Fatalf("%s sent at %d µs, before its plan %d", r.ID, r.ArrivalUS, want)
				}
				if d > 5000 && late == "" {
					late = fmt.Sprintf("%s sent at %d µs, planned %d", r.ID, r.ArrivalUS, want)
				}
			}
			if late == "" {
				return
			}
			t.Logf("attempt %d: %s", attempt, late)
		}
		if l, over := loadavg.Overloaded(); over {
			t.Skipf("machine overloaded (load average %.1f on %d cores): no attempt sent every request within 5 ms; last: %s", l, runtime.NumCPU(), late)
		}
		t.Errorf("no attempt sent every request within 5 ms of its plan; last: %s", late)
	})
	t.Run("poisson", func(t *testing.T) {
		sum, c, _ := session(t, srv, Completions, path, Options{Timing: TimingPoisson, Rate: 400, Seed: 7})
		lagOK(t, sum)
		// The plan is the seed's: sent times follow it within the lag.
		due := map[string]int64{}
		for _, e := range c.ch {
			if e.Event == trace.EventDue {
				due[e.RequestID] = e.TimeUS
			}
		}
		var plan []int64
		for _, r := range reqs {
			plan = append(plan, due[r.ID])
		}
		if plan[0] != 0 || !sort.SliceIsSorted(plan, func(i, j int) bool { return plan[i] < plan[j] }) {
			t.Fatalf("Poisson plan %v: want increasing from 0 in table order", plan)
		}
		mean := float64(plan[len(plan)-1]) / float64(len(plan)-1)
		if mean < 1250 || mean > 5000 {
			t.Errorf("mean gap %.0f µs at 400/s, want about 2500", mean)
		}
		_, c2, _ := session(t, srv, Completions, path, Options{Timing: TimingPoisson, Rate: 400, Seed: 7})
		for _, e := range c2.ch {
			if e.Event == trace.EventDue && e.TimeUS != due[e.RequestID] {
				t.Fatalf("%s: due at %d, then %d with the same seed", e.RequestID, due[e.RequestID], e.TimeUS)
			}
		}
	})
	t.Run("offline", func(t *testing.T) {
		_, c, _ := session(t, srv, Completions, path, Options{Timing: TimingOffline})
		for _, r := range c.res {
			if r.ArrivalUS > 20000 {
				t.Errorf("%s sent at %d µs, want at once", r.ID, r.ArrivalUS)
			}
		}
	})
	t.Run("closed loop", func(t *testing.T) {
		srv := fakellm.New(fakellm.Config{TTFT: 5 * time.Millisecond, ITL: time.Millisecond})
		defer srv.Close()
		sum, c, _ := session(t, srv, Completions, path, Options{Timing: TimingOffline, Concurrency: 4})
		if m := srv.MaxInFlight(); m != 4 {
			t.Errorf("server saw %d in flight, want 4", m)
		}
		if sum.Completed != 40 || len(srv.Requests()) != 40+1 {
			t.Errorf("completed %d, server got %d requests (with the probe), want 40 and 41", sum.Completed, len(srv.Requests()))
		}
		// Table order: request k+4 goes when one of the first k+4 ended.
		sort.Slice(c.res, func(i, j int) bool { return c.res[i].ArrivalUS < c.res[j].ArrivalUS })
		for i, r := range c.res {
			if i < 4 {
				continue
			}
			ended := 0
			for _, q := range c.res[:i] {
				if q.FinishedUS <= r.ArrivalUS {
					ended++
				}
			}
			if ended < i-3 {
				t.Errorf("%s sent at %d µs with only %d of the %d before it finished", r.ID, r.ArrivalUS, ended, i)
			}
		}
	})
}

// Failures are rows, never crashes: HTTP errors, a cut stream and an error
// event are failed or rejected with the server's words; dependents of a
// failed request are dropped as blis-sim drops them.
func TestFailuresAreRows(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 2 * time.Millisecond, ITL: time.Millisecond,
		Fail: func(r *fakellm.Request) fakellm.Failure {
			switch r.MaxTokens {
			case 7:
				return fakellm.Failure{Status: 500}
			case 9:
				return fakellm.Failure{Status: 429}
			case 11:
				return fakellm.Failure{CutAfter: 3}
			case 13:
				return fakellm.Failure{CutAfter: 2, StreamError: "out of memory"}
			}
			return fakellm.Failure{CutAfter: -1}
		}})
	defer srv.Close()
	failed := trace.NewRequest("src-failed")
	failed.ArrivalUS, failed.InputTokens, failed.OutputTokens, failed.SourceStatus = 0, 10, 5, trace.SourceFailed
	reqs := []trace.Request{
		llm("ok", 0, 40, 5), llm("e500", 0, 40, 7), llm("e429", 0, 40, 9), llm("cut", 0, 40, 11), llm("sse-err", 0, 40, 13),
		failed,
		dep("after-500", 0, 40, 5, "e500"), dep("after-after", 0, 40, 5, "after-500"), dep("after-src", 0, 40, 5, "src-failed"),
		dep("after-ok", 0, 40, 5, "ok"),
	}
	sum, c, _ := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingOffline})
	res := c.byID()
	for _, tc := range []struct {
		id, status, reason string
	}{
		{"ok", trace.StatusCompleted, ""},
		{"e500", trace.StatusFailed, "HTTP 500: injected failure 500"},
		{"e429", trace.StatusRejected, "HTTP 429: injected failure 429"},
		{"cut", trace.StatusFailed, "stream: connection reset by the server"},
		{"sse-err", trace.StatusFailed, "server error in the stream: out of memory"},
		{"src-failed", trace.StatusSourceFailed, ""},
		{"after-500", trace.StatusDropped, "dependency e500 failed"},
		{"after-after", trace.StatusDropped, "dependency after-500 dropped"},
		{"after-src", trace.StatusDropped, "dependency src-failed source_failed"},
		{"after-ok", trace.StatusCompleted, ""},
	} {
		r := res[tc.id]
		if r.Status != tc.status || !strings.Contains(r.DropReason, tc.reason) {
			t.Errorf("%s: %s %q, want %s %q", tc.id, r.Status, r.DropReason, tc.status, tc.reason)
		}
	}
	if r := res["cut"]; r.GeneratedTokens != 3 || r.FirstTokenUS == trace.Null || r.SourceStatus != trace.SourceFailed {
		t.Errorf("cut stream: %d tokens, first token %d, source_status %q: want the 3 tokens seen, and failed", r.GeneratedTokens, r.FirstTokenUS, r.SourceStatus)
	}
	if sum.Failed != 3 || sum.Rejected != 1 || sum.Dropped != 3 {
		t.Errorf("summary %+v", sum)
	}
	// Every kind is counted, by HTTP status or error class (issue 32,
	// item 14).
	var kinds []string
	for _, r := range sum.Reasons {
		kinds = append(kinds, fmt.Sprintf("%d %s %s", r.N, r.Status, r.Class))
	}
	if got, want := strings.Join(kinds, "; "), "1 failed HTTP 500; 1 failed server error in the stream; 1 failed stream: connection reset by the server; "+
		"1 rejected HTTP 429; 1 dropped a dependency was dropped; 1 dropped a dependency was failed; 1 dropped a dependency was source_failed"; got != want {
		t.Errorf("reasons:\n got %s\nwant %s", got, want)
	}
}

// A client timeout cancels the request: timed_out at arrival + timeout, as
// blis-sim writes it; its dependents are dropped.
func TestClientTimeout(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 10 * time.Millisecond, ITL: 20 * time.Millisecond})
	defer srv.Close()
	slow := llm("slow", 0, 40, 20) // 10 + 19×20 ms
	own := llm("own", 0, 40, 20)
	own.TimeoutUS = 30000
	reqs := []trace.Request{slow, own, llm("quick", 0, 40, 2), dep("next", 0, 40, 2, "slow")}
	_, c, _ := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingOffline, ClientTimeout: 100 * time.Millisecond})
	res := c.byID()
	for id, want := range map[string]int64{"slow": 100000, "own": 30000} {
		r := res[id]
		if r.Status != trace.StatusTimedOut || r.E2EUS != want || r.FinishedUS != r.ArrivalUS+want || r.TimeoutUS != want {
			t.Errorf("%s: %s e2e %d finished %d arrival %d timeout %d, want timed_out after %d µs", id, r.Status, r.E2EUS, r.FinishedUS, r.ArrivalUS, r.TimeoutUS, want)
		}
		if r.GeneratedTokens == 0 || r.GeneratedTokens >= 20 {
			t.Errorf("%s: %d tokens streamed before the timeout", id, r.GeneratedTokens)
		}
	}
	if r := res["quick"]; r.Status != trace.StatusCompleted {
		t.Errorf("quick: %s", r.Status)
	}
	if r := res["next"]; r.Status != trace.StatusDropped || r.DropReason != "dependency slow timed_out" {
		t.Errorf("next: %s %q", r.Status, r.DropReason)
	}
}

// Shared prefixes: the same prefix_hashes give the same token ids, so the
// server's prefix cache hits exactly the shared blocks (vLLM's accounting,
// which the fake server keeps).
func TestPrefixSharing(t *testing.T) {
	for _, api := range []API{Completions, Chat} {
		t.Run(string(api), func(t *testing.T) {
			srv := fakellm.New(fakellm.Config{TTFT: time.Millisecond, ITL: time.Millisecond})
			defer srv.Close()
			a := llm("a", 0, 64, 2) // 4 blocks of 16
			a.PrefixHashes = []uint64{1, 2, 3, 4}
			b := dep("b", 0, 64, 2, "a") // shares 3 blocks
			b.PrefixHashes = []uint64{1, 2, 3, 9}
			cc := dep("c", 0, 50, 2, "b") // shares 2, then tokens of its own
			cc.PrefixHashes = []uint64{1, 2}
			d := dep("d", 0, 64, 2, "c") // nothing
			sum, col, _ := session(t, srv, api, writeTable(t, []trace.Request{a, b, cc, d}, true, 16), Options{Timing: TimingOffline})
			if sum.Completed != 4 {
				t.Fatalf("%+v", sum)
			}
			res := col.byID()
			for id, want := range map[string]int32{"a": 0, "b": 48, "c": 32, "d": 0} {
				if got := res[id].CachedTokens; got != want {
					t.Errorf("%s: %d cached tokens, want %d", id, got, want)
				}
			}
			if api == Completions && res["c"].InputTokens != 50 {
				t.Errorf("c: the server counted %d prompt tokens, want 50", res["c"].InputTokens)
			}
		})
	}
}

func TestPromptsAreExactAndShared(t *testing.T) {
	p := Prompts{Seed: 5, BlockSize: 16, Lo: 1000, Hi: 30000}
	a := llm("a", 0, 40, 1)
	a.PrefixHashes = []uint64{11, 12, 13}
	b := llm("b", 0, 100, 1)
	b.PrefixHashes = []uint64{11, 12, 77}
	x, y := p.AppendIDs(nil, &a), p.AppendIDs(nil, &b)
	if len(x) != 40 || len(y) != 100 {
		t.Fatalf("lengths %d, %d", len(x), len(y))
	}
	for i := 0; i < 32; i++ {
		if x[i] != y[i] {
			t.Fatalf("token %d differs inside the shared blocks", i)
		}
	}
	if equalIDs(x[32:40], y[32:40]) {
		t.Fatal("the third blocks have different hashes but the same tokens")
	}
	for _, id := range y {
		if id < 1000 || id >= 30000 {
			t.Fatalf("token %d outside the range", id)
		}
	}
	q := p
	q.Seed = 6
	if equalIDs(p.AppendIDs(nil, &a), q.AppendIDs(nil, &a)) {
		t.Fatal("another seed gave the same prompt")
	}
	c, d := llm("c", 0, 40, 1), llm("d", 0, 40, 1)
	if equalIDs(p.AppendIDs(nil, &c), p.AppendIDs(nil, &d)) {
		t.Fatal("two requests without hashes share their prompt")
	}
	w := string(p.AppendWords(nil, x))
	if n := len(strings.Fields(w)); n != 40 {
		t.Fatalf("%d words for 40 tokens", n)
	}
}

// Stop: nothing more is sent, requests in flight have the drain time to
// finish, then they are cancelled; every row read has a result, the rest
// of the table is not read.
func TestStopDrains(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 20 * time.Millisecond, ITL: 10 * time.Millisecond})
	defer srv.Close()
	var reqs []trace.Request
	for i := 0; i < 50; i++ {
		out := int32(3) // 40 ms
		if i%2 == 1 {
			out = 100 // a second: still running at the drain's end
		}
		reqs = append(reqs, llm(fmt.Sprintf("r%02d", i), int64(i)*5000, 32, out))
		reqs = append(reqs, dep(fmt.Sprintf("r%02d-next", i), 0, 32, 2, fmt.Sprintf("r%02d", i)))
	}
	path := writeTable(t, reqs, true, 0)
	tab, err := OpenTable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	st, _ := tab.Check(0, 0)
	tg := Target{URL: srv.URL0(), API: Completions, Model: "fake-model"}
	c := &collector{}
	s := NewSession(tab, &st, &tg, NewHTTPClient(64), Options{Timing: TimingTrace, Drain: 100 * time.Millisecond, Results: c,
		Prompts: Prompts{Seed: 1, BlockSize: 16, Lo: 1000, Hi: 30000}})
	go func() {
		time.Sleep(60 * time.Millisecond)
		s.Stop("interrupted (SIGINT)")
	}()
	start := time.Now()
	sum, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 400*time.Millisecond {
		t.Errorf("took %v: the drain is 100 ms", el)
	}
	if sum.Stopped != "interrupted (SIGINT)" || sum.Rows == int64(len(reqs)) || sum.Rows != int64(len(c.res)) {
		t.Fatalf("stopped %q, %d rows written of %d", sum.Stopped, sum.Rows, len(c.res))
	}
	kinds := map[string]int{}
	for _, r := range c.res {
		switch {
		case r.Status == trace.StatusCompleted:
			kinds["completed"]++
		case r.Status == trace.StatusUnfinished && r.DropReason == "in flight when the drain timeout (100ms) ended":
			kinds["cancelled"]++
			if r.ArrivalUS == trace.Null || r.FinishedUS != trace.Null {
				t.Errorf("%s cancelled in flight: arrival %d finish %d", r.ID, r.ArrivalUS, r.FinishedUS)
			}
		case r.Status == trace.StatusUnfinished && strings.HasPrefix(r.DropReason, "not sent: interrupted (SIGINT)"):
			kinds["not sent"]++
		case r.Status == trace.StatusUnfinished && r.DropReason == "dependencies unfinished when the session stopped":
			kinds["waiting"]++
		default:
			t.Errorf("%s: %s %q", r.ID, r.Status, r.DropReason)
		}
	}
	t.Logf("%v", kinds)
	if kinds["completed"] == 0 || kinds["cancelled"] == 0 || kinds["waiting"] == 0 {
		t.Errorf("want completed, cancelled and waiting rows: %v", kinds)
	}
	if sent := len(srv.Requests()); int64(sent) != sum.Sent {
		t.Errorf("the server got %d requests, the summary says %d sent", sent, sum.Sent)
	}
}

func TestDurationAndLimit(t *testing.T) {
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the timing tests on their own, after the others")
	}
	srv := fakellm.New(fakellm.Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	var reqs []trace.Request
	for i := 0; i < 100; i++ {
		reqs = append(reqs, llm(fmt.Sprintf("r%02d", i), int64(i)*4000, 16, 2))
	}
	path := writeTable(t, reqs, true, 0)
	sum, c, _ := session(t, srv, Completions, path, Options{Timing: TimingTrace, Duration: 100 * time.Millisecond, Drain: time.Second})
	if sum.Stopped != "stopped at --duration 100ms" || sum.Completed < 20 || sum.Completed > 27 {
		t.Errorf("--duration 100ms at one every 4 ms: %d completed, stopped %q", sum.Completed, sum.Stopped)
	}
	for _, r := range c.res {
		if r.Status == trace.StatusCompleted && r.ArrivalUS > 100000 {
			t.Errorf("%s sent at %d µs, after the duration", r.ID, r.ArrivalUS)
		}
	}
	sum, c, _ = session(t, srv, Completions, path, Options{Timing: TimingOffline, Limit: 7})
	if sum.Rows != 7 || sum.Completed != 7 {
		t.Errorf("--limit 7: %+v", sum)
	}
	for _, r := range c.res {
		if r.ID >= "r07" {
			t.Errorf("--limit 7 sent %s", r.ID)
		}
	}
}

// Warm-up requests reach the server but not the results.
func TestWarmupNotInResults(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	reqs := []trace.Request{llm("a", 0, 100, 3), llm("b", 1000, 50, 2)}
	sum, c, _ := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingTrace, Warmup: 5})
	if len(c.res) != 2 || sum.Warmup.Sent != 5 || sum.Warmup.Completed != 5 {
		t.Fatalf("%d results, warm-up %+v", len(c.res), sum.Warmup)
	}
	log := srv.Requests()
	if len(log) != 1+5+2 {
		t.Fatalf("server got %d requests, want the probe, 5 warm-ups and 2", len(log))
	}
	shapes := map[int]int{}
	for _, r := range log[1:6] {
		shapes[len(r.Prompt)]++
	}
	if shapes[100] != 3 || shapes[50] != 2 {
		t.Errorf("warm-up prompt lengths %v, want the first rows' cycled", shapes)
	}
}

// An unsorted table is ordered as blis-sim orders it; a bad graph is an
// error naming the row before anything is sent.
func TestUnsortedAndBadTables(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	reqs := []trace.Request{dep("b2", 0, 16, 2, "b"), llm("b", 3000, 16, 2), llm("a", 1000, 16, 2), dep("a2", 0, 16, 2, "a")}
	sum, c, _ := session(t, srv, Completions, writeTable(t, reqs, false, 0), Options{Timing: TimingTrace})
	if sum.Completed != 4 {
		t.Fatalf("%+v", sum)
	}
	if res := c.byID(); res["b2"].ArrivalUS < res["b"].FinishedUS {
		t.Error("b2 went before b finished")
	}
	for _, tc := range []struct {
		reqs   []trace.Request
		sorted bool
		want   string
	}{
		{[]trace.Request{llm("a", 0, 8, 1), dep("b", 0, 8, 1, "zz")}, false, `row 2 (request b): column depends_on: "zz" not found in the table`},
		{[]trace.Request{llm("a", 0, 8, 1), dep("b", 0, 8, 1, "zz")}, true, `"zz" not found among earlier rows`},
		{[]trace.Request{llm("a", 0, 8, 1), llm("a", 5, 8, 1)}, true, `duplicate id "a"`},
		{[]trace.Request{llm("a", 0, 8, 1), llm("a", 5, 8, 1)}, false, `duplicate id "a"`},
		{[]trace.Request{dep("a", 0, 8, 1, "b"), dep("b", 0, 8, 1, "a")}, false, "dependency cycle"},
		{[]trace.Request{llm("a", 50, 8, 1), llm("b", 10, 8, 1)}, true, "promises blis.sorted=arrival but 10 comes after 50"},
	} {
		tab, err := OpenTable(writeTable(t, tc.reqs, tc.sorted, 0), nil)
		if err == nil {
			_, err = tab.Check(0, 0)
			tab.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// The event log has each request's due, sent, chunks and end, in order.
func TestChunkEvents(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 3 * time.Millisecond, ITL: 2 * time.Millisecond})
	defer srv.Close()
	_, c, _ := session(t, srv, Completions, writeTable(t, []trace.Request{llm("a", 0, 16, 4)}, true, 0), Options{Timing: TimingTrace})
	var kinds []string
	last := int64(-1)
	for _, e := range c.ch {
		kinds = append(kinds, e.Event)
		if e.TimeUS < last {
			t.Errorf("event %s at %d before the previous one at %d", e.Event, e.TimeUS, last)
		}
		last = e.TimeUS
	}
	if got := strings.Join(kinds, " "); got != "due sent chunk chunk chunk chunk done" {
		t.Errorf("events %q", got)
	}
	r := c.res[0]
	if c.ch[2].TimeUS != r.FirstTokenUS || c.ch[5].TimeUS != r.FinishedUS || c.ch[1].TimeUS != r.ArrivalUS {
		t.Errorf("events %+v disagree with the result %+v", c.ch, r)
	}
}

// On a sorted table, memory follows the sessions in flight: finished
// rows are forgotten once no later row can name them.
func TestMemoryFollowsSessionsInFlight(t *testing.T) {
	srv := fakellm.New(fakellm.Config{})
	defer srv.Close()
	var reqs []trace.Request
	for s := 0; s < 300; s++ {
		id := fmt.Sprintf("s%03d", s)
		reqs = append(reqs, llm(id+"-0", int64(s), 8, 1), dep(id+"-1", 0, 8, 1, id+"-0"), dep(id+"-2", 0, 8, 1, id+"-1"))
	}
	sum, _, _ := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingOffline, Concurrency: 4})
	if sum.Completed != 900 {
		t.Fatalf("%+v", sum)
	}
	if sum.PeakHeld > 60 {
		t.Errorf("held %d rows at once for 4 sessions in flight", sum.PeakHeld)
	}
	t.Logf("peak rows held: %d of 900", sum.PeakHeld)
}
