package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/load"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
)

type collector struct {
	mu  sync.Mutex
	res []trace.Result
}

func (c *collector) Write(r *trace.Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := *r
	x.PrefixHashes = append([]uint64(nil), r.PrefixHashes...)
	c.res = append(c.res, x)
	return nil
}

func (c *collector) all() []trace.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]trace.Result(nil), c.res...)
}

// testCluster is two Llama-3.1-8B replicas on H100s (the roofline model).
func testCluster(t *testing.T, replicas int) config.Cluster {
	t.Helper()
	cfg := config.Default()
	cfg.Replicas = replicas
	cfg.Latency.Mode = "roofline"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start serves cfg on a loopback port; the returned function closes it.
func start(t *testing.T, cfg config.Cluster, res *collector) (*Server, string, func() Outcome) {
	t.Helper()
	setup, err := sim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Setup: setup, Results: res, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	s.Start()
	var once sync.Once
	var oc Outcome
	stop := func() Outcome {
		once.Do(func() {
			var err error
			oc, err = s.Close(5 * time.Second)
			if err != nil {
				t.Errorf("Close: %v", err)
			}
			hs.Close()
		})
		return oc
	}
	t.Cleanup(func() { stop() })
	return s, hs.URL, stop
}

func writeTable(t *testing.T, reqs []trace.Request, blockSize int) string {
	t.Helper()
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	md.Set(trace.MetaPrefixBlockSize, fmt.Sprint(blockSize))
	p := filepath.Join(t.TempDir(), "requests.arrow")
	sch := trace.RequestsSchema(md)
	sink, err := trace.Create(p, nil, sch)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, sch)
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

// closedLoopTable is n requests every gap, of varied sizes; every third
// one shares a 4-block system prompt (prefix hashes 1..4), so prefix
// caching is exercised.
func closedLoopTable(n int, gap int64) []trace.Request {
	var reqs []trace.Request
	for i := 0; i < n; i++ {
		r := trace.NewRequest(fmt.Sprintf("r%02d", i))
		r.ArrivalUS = int64(i) * gap
		r.InputTokens = int32(100 + 37*(i%5))
		r.OutputTokens = int32(5 + 7*(i%4))
		if i%3 == 0 {
			r.PrefixHashes = []uint64{1, 2, 3, 4}
			for b := int32(4); b < r.InputTokens/16; b++ {
				r.PrefixHashes = append(r.PrefixHashes, uint64(1000*i)+uint64(b))
			}
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// runLoad drives url with blis-load's session (the code blis-load runs)
// on the table at path; it returns its results by request id.
func runLoad(t *testing.T, url string, api load.API, path string, timing load.Timing) map[string]trace.Result {
	t.Helper()
	tab, err := load.OpenTable(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	st, err := tab.Check(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	hc := load.NewHTTPClient(64)
	tg := load.Target{URL: url + "/v1", API: api}
	pr, err := load.Probe(context.Background(), hc, tg, load.ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Ext.IgnoreEOS || !pr.Usage {
		t.Fatalf("probe: extensions %+v, usage %v: blis-serve accepts min_tokens/ignore_eos and reports usage", pr.Ext, pr.Usage)
	}
	tg.Model, tg.Ext = pr.Model, pr.Ext
	c := &collector{}
	s := load.NewSession(tab, &st, &tg, hc, load.Options{Timing: timing, Speedup: 1, Results: c,
		Drain: 5 * time.Second, Prompts: load.Prompts{Seed: 7, BlockSize: tab.PrefixBlockSize, Lo: load.DefaultTokenLo, Hi: load.DefaultTokenHi}})
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string]trace.Result{}
	for _, r := range c.all() {
		out[r.ID] = r
	}
	return out
}

// byArrival sorts results by arrival_us (ties by id).
func byArrival(rs []trace.Result) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].ArrivalUS < rs[j].ArrivalUS })
}

// The closed loop: blis-load drives blis-serve with a table at fixed
// times; what the client measures (TTFT, E2E per request) must match what
// the simulation recorded for the same arrivals to within the HTTP and
// wake-up latency, and the simulation must be what blis-sim computes for
// the table with those arrival times (prefix sharing recovered from the
// prompts' token ids). The server runs in this process on the same cores,
// so an attempt passes when 90% of requests are within 3 ms and all
// within 20 ms; the test fails when none of three attempts does.
func TestClosedLoopTiming(t *testing.T) {
	if raceEnabled {
		t.Skip("timing is not measurable under the race detector")
	}
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the timing tests on their own, after the others")
	}
	var last string
	for attempt := 1; attempt <= 3; attempt++ {
		p50, p90, worst, mean, reordered := closedLoop(t)
		if reordered != "" {
			// Sends 40 ms apart arrived out of order: the machine stalled
			// the client longer than that, which is no timing to measure.
			last = reordered
			t.Logf("attempt %d: %s", attempt, last)
			continue
		}
		last = fmt.Sprintf("|client − simulated| over TTFT and E2E of 24 requests: p50 %d µs, p90 %d µs, max %d µs (mean signed %+d µs)", p50, p90, worst, mean)
		t.Logf("attempt %d: %s", attempt, last)
		if p90 <= 3000 && worst <= 20000 {
			return
		}
	}
	skipIfOverloaded(t, last)
	t.Fatalf("closed loop off by more than the tolerance in 3 attempts; last: %s", last)
}

// skipIfOverloaded skips a wall-clock test whose attempts all failed on a
// machine loaded beyond twice its cores (1-minute load average), where no
// timing is measurable; it says so.
func skipIfOverloaded(t *testing.T, last string) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return
	}
	if l, err := strconv.ParseFloat(f[0], 64); err == nil && l > 2*float64(runtime.NumCPU()) {
		t.Skipf("machine overloaded (load average %.1f on %d cores): no attempt was within tolerance; last: %s", l, runtime.NumCPU(), last)
	}
}

// closedLoop returns reordered (and no figures) when the server saw the
// requests in another order than the client sent them.
func closedLoop(t *testing.T) (p50, p90, worst, mean int64, reordered string) {
	cfg := testCluster(t, 2)
	served := &collector{}
	_, url, stop := start(t, cfg, served)
	reqs := closedLoopTable(24, 40_000)
	path := writeTable(t, reqs, 16)
	client := runLoad(t, url, load.Completions, path, load.TimingTrace)
	stop()
	sim := served.all()
	if len(sim) != len(reqs)+1 {
		t.Fatalf("blis-serve wrote %d results, want %d (the table and the probe)", len(sim), len(reqs)+1)
	}
	byArrival(sim)
	// The probe comes first; then the table's requests, in the order they
	// were sent (40 ms apart, far more than any jitter).
	var cl []trace.Result
	for _, r := range client {
		cl = append(cl, r)
	}
	byArrival(cl)
	if len(cl) != len(reqs) {
		t.Fatalf("blis-load wrote %d results, want %d", len(cl), len(reqs))
	}
	var errs []int64
	var cachedShared int32
	for i, c := range cl {
		s := sim[i+1]
		if c.Status != trace.StatusCompleted || s.Status != trace.StatusCompleted {
			t.Fatalf("%s: client %s (%s), server %s (%s)", c.ID, c.Status, c.DropReason, s.Status, s.DropReason)
		}
		if c.InputTokens != s.InputTokens || c.OutputTokens != s.OutputTokens || c.GeneratedTokens != s.GeneratedTokens || c.CachedTokens != s.CachedTokens {
			return 0, 0, 0, 0, fmt.Sprintf("%s: client in %d out %d gen %d cached %d, server in %d out %d gen %d cached %d: the server saw another order than the client sent", c.ID,
				c.InputTokens, c.OutputTokens, c.GeneratedTokens, c.CachedTokens, s.InputTokens, s.OutputTokens, s.GeneratedTokens, s.CachedTokens)
		}
		if len(c.PrefixHashes) > 0 && c.ArrivalUS > 0 {
			cachedShared += c.CachedTokens
		}
		for _, d := range []int64{c.TTFTUS - s.TTFTUS, c.E2EUS - s.E2EUS} {
			mean += d
			if d < 0 {
				d = -d
			}
			errs = append(errs, d)
		}
	}
	if cachedShared == 0 {
		t.Fatal("no prompt tokens were served from the prefix cache: the shared prefix was not recovered")
	}
	// blis-sim on the table, with the arrival times blis-serve recorded
	// (and the probe, which ran on the same cluster), gives the same
	// simulation.
	replay := []trace.Request{sim[0].Request}
	tab := map[string]trace.Request{}
	for _, r := range reqs {
		tab[r.ID] = r
	}
	for i, c := range cl {
		r := tab[c.ID]
		r.ArrivalUS = sim[i+1].ArrivalUS
		replay = append(replay, r)
	}
	models, _, err := engine.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &collector{}
	if _, err := engine.Run(cfg, models, engine.SliceSource(replay), want, engine.Options{PrefixBlockSize: 16, CheckInvariants: true}); err != nil {
		t.Fatal(err)
	}
	got := map[string]trace.Result{}
	for i, c := range cl {
		got[c.ID] = sim[i+1]
	}
	for _, w := range want.all() {
		g, ok := got[w.ID]
		if !ok {
			continue // the probe
		}
		if g.TTFTUS != w.TTFTUS || g.E2EUS != w.E2EUS || g.CachedTokens != w.CachedTokens || g.ReplicaID != w.ReplicaID {
			t.Fatalf("%s: blis-serve simulated ttft %d e2e %d cached %d on %s; blis-sim gives ttft %d e2e %d cached %d on %s",
				w.ID, g.TTFTUS, g.E2EUS, g.CachedTokens, g.ReplicaID, w.TTFTUS, w.E2EUS, w.CachedTokens, w.ReplicaID)
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i] < errs[j] })
	return errs[len(errs)/2], errs[len(errs)*9/10], errs[len(errs)-1], mean / int64(len(errs)), ""
}

// Chat prompts are counted one token per word: blis-load's chat prompts
// come back with exactly the table's input tokens and prefix sharing.
func TestChatThroughLoad(t *testing.T) {
	served := &collector{}
	_, url, stop := start(t, testCluster(t, 1), served)
	reqs := closedLoopTable(6, 20_000)
	client := runLoad(t, url, load.Chat, writeTable(t, reqs, 16), load.TimingTrace)
	stop()
	var cached int32
	for _, r := range reqs {
		c := client[r.ID]
		if c.Status != trace.StatusCompleted || c.InputTokens != r.InputTokens || c.GeneratedTokens != r.OutputTokens {
			t.Fatalf("%s: %s (%s), input %d (want %d), generated %d (want %d)", r.ID, c.Status, c.DropReason, c.InputTokens, r.InputTokens, c.GeneratedTokens, r.OutputTokens)
		}
		cached += c.CachedTokens
	}
	if cached == 0 {
		t.Fatal("no cached tokens: shared word prefixes were not recovered")
	}
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// openAI chunk and response shapes, as OpenAI's clients read them.
type choice struct {
	Index int     `json:"index"`
	Text  *string `json:"text"`
	Delta *struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	Message *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func TestProtocol(t *testing.T) {
	_, url, _ := start(t, testCluster(t, 1), &collector{})
	v1 := url + "/v1"

	t.Run("models", func(t *testing.T) {
		resp, err := http.Get(v1 + "/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct {
			Object string
			Data   []struct{ ID, Object string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "llama-3.1-8b" || list.Data[0].Object != "model" {
			t.Fatalf("models: %+v", list)
		}
		h, err := http.Get(url + "/health")
		if err != nil || h.StatusCode != 200 {
			t.Fatalf("health: %v %v", h, err)
		}
		h.Body.Close()
	})

	// A path served with another method is a 405 naming the methods it
	// takes (issue 32, item 18: GET /v1/completions was a 404); an unknown
	// path is a 404.
	t.Run("methods", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			code         int
			allow        string
		}{
			{"GET", "/v1/completions", 405, "POST"},
			{"GET", "/v1/chat/completions", 405, "POST"},
			{"DELETE", "/v1/models", 405, "GET, HEAD"},
			{"POST", "/health", 405, "GET, HEAD"},
			{"GET", "/v1/embeddings", 404, ""},
		} {
			req, _ := http.NewRequest(tc.method, url+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e apiError
			err = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow || err != nil || e.Error.Code != tc.code {
				t.Errorf("%s %s: HTTP %d, Allow %q, error %+v (%v); want %d and Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), e, err, tc.code, tc.allow)
			}
		}
	})

	for _, tc := range []struct {
		name, path, body string
		chat             bool
		in, out          int
	}{
		{"completions ids", "/completions", `{"model":"llama-3.1-8b","prompt":[5,6,7,8,9,10],"max_tokens":5,"temperature":0.7}`, false, 6, 5},
		{"completions text", "/completions", `{"model":"llama-3.1-8b","prompt":"the cat sat","max_tokens":2}`, false, 3, 2},
		{"completions batch of one", "/completions", `{"model":"llama-3.1-8b","prompt":[[1,2,3]],"max_tokens":1}`, false, 3, 1},
		{"chat", "/chat/completions", `{"model":"llama-3.1-8b","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello world"}]}],"max_completion_tokens":4}`, true, 4, 4},
		{"model alias", "/completions", `{"model":"meta-llama/Llama-3.1-8B","prompt":[1,2],"max_tokens":3}`, false, 2, 3},
	} {
		t.Run("non-streaming "+tc.name, func(t *testing.T) {
			resp, b := post(t, v1+tc.path, tc.body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			var c completion
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			wantObj := "text_completion"
			if tc.chat {
				wantObj = "chat.completion"
			}
			if c.Object != wantObj || c.ID == "" || c.Created == 0 || len(c.Choices) != 1 || c.Usage == nil ||
				c.Usage.PromptTokens != tc.in || c.Usage.CompletionTokens != tc.out || c.Usage.TotalTokens != tc.in+tc.out ||
				c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "length" {
				t.Fatalf("response %s", b)
			}
			text := ""
			if tc.chat {
				if c.Choices[0].Message == nil || c.Choices[0].Message.Role != "assistant" {
					t.Fatalf("no assistant message: %s", b)
				}
				text = c.Choices[0].Message.Content
			} else if c.Choices[0].Text != nil {
				text = *c.Choices[0].Text
			}
			if n := len(strings.Fields(text)); n != tc.out {
				t.Fatalf("%d words of text for %d tokens: %q", n, tc.out, text)
			}
		})
		t.Run("streaming "+tc.name, func(t *testing.T) {
			body := strings.TrimSuffix(tc.body, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
			resp, b := post(t, v1+tc.path, body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			sse := load.NewSSE(bytes.NewReader(b), 1<<20)
			tokens, finished, usage, done := 0, 0, 0, false
			for {
				ev, err := sse.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if done {
					t.Fatalf("an event after [DONE]: %s", ev.Data)
				}
				if string(ev.Data) == "[DONE]" {
					done = true
					continue
				}
				var c completion
				if err := json.Unmarshal(ev.Data, &c); err != nil {
					t.Fatalf("chunk %s: %v", ev.Data, err)
				}
				want := "text_completion"
				if tc.chat {
					want = "chat.completion.chunk"
				}
				if c.Object != want || c.ID == "" || c.Model == "" {
					t.Fatalf("chunk %s", ev.Data)
				}
				if c.Usage != nil {
					usage++
					if len(c.Choices) != 0 || c.Usage.PromptTokens != tc.in || c.Usage.CompletionTokens != tc.out {
						t.Fatalf("usage chunk %s", ev.Data)
					}
					continue
				}
				if len(c.Choices) != 1 {
					t.Fatalf("chunk %s", ev.Data)
				}
				ch := c.Choices[0]
				if tc.chat && ch.Delta != nil && ch.Delta.Content != nil && *ch.Delta.Content != "" || !tc.chat && ch.Text != nil && *ch.Text != "" {
					tokens++
				}
				if ch.FinishReason != nil {
					finished++
					if *ch.FinishReason != "length" || tokens != tc.out {
						t.Fatalf("finish %q after %d tokens: %s", *ch.FinishReason, tokens, ev.Data)
					}
				}
			}
			if tokens != tc.out || finished != 1 || usage != 1 || !done {
				t.Fatalf("%d token chunks (want %d), %d finish reasons, %d usage chunks, [DONE] %v\n%s", tokens, tc.out, finished, usage, done, b)
			}
		})
	}

	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"unknown model", "/completions", `{"model":"gpt-9","prompt":[1],"max_tokens":1}`, 404, "gpt-9"},
		{"bad JSON", "/completions", `{"model":"llama-3.1-8b","prompt":[1],`, 400, "invalid JSON"},
		{"max_tokens type", "/completions", `{"model":"llama-3.1-8b","prompt":[1],"max_tokens":"ten"}`, 400, "field max_tokens: expected an integer, found string"},
		{"prompt type", "/completions", `{"model":"llama-3.1-8b","prompt":{"a":1},"max_tokens":1}`, 400, "field prompt"},
		{"no model", "/completions", `{"prompt":[1],"max_tokens":1}`, 400, "field model"},
		{"max_tokens 0", "/completions", `{"model":"llama-3.1-8b","prompt":[1],"max_tokens":0}`, 400, "field max_tokens"},
		{"min over max", "/completions", `{"model":"llama-3.1-8b","prompt":[1],"max_tokens":2,"min_tokens":3}`, 400, "field min_tokens"},
		{"n", "/completions", `{"model":"llama-3.1-8b","prompt":[1],"n":2}`, 400, "field n"},
		{"batch", "/completions", `{"model":"llama-3.1-8b","prompt":[[1],[2]]}`, 400, "batch of 2"},
		{"messages type", "/chat/completions", `{"model":"llama-3.1-8b","messages":"hi"}`, 400, "field messages"},
		{"empty chat", "/chat/completions", `{"model":"llama-3.1-8b","messages":[]}`, 400, "field messages"},
		{"negative id", "/completions", `{"model":"llama-3.1-8b","prompt":[1,-2]}`, 400, "token 1"},
		// More KV than a replica has: the engine drops it, with its reason.
		{"too long for the KV cache", "/completions", `{"model":"llama-3.1-8b","prompt":[1,2],"max_tokens":1000000,"stream":true}`, 400, "dropped: needs 62501 KV blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, v1+tc.path, tc.body)
			var e apiError
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("HTTP %d, not an OpenAI error: %s", resp.StatusCode, b)
			}
			if resp.StatusCode != tc.code || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("HTTP %d: %s; want %d naming %q", resp.StatusCode, b, tc.code, tc.want)
			}
		})
	}
}

// A client that goes away mid-stream cancels its request in the engine:
// it ends timed_out ("client disconnected") with the tokens generated so
// far, and its replica is free for the next request.
func TestCancelOnDisconnect(t *testing.T) {
	served := &collector{}
	_, url, stop := start(t, testCluster(t, 1), served)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
		strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3,4],"max_tokens":100000,"min_tokens":100000,"ignore_eos":true,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	chunks := 0
	for chunks < 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			chunks++
		}
	}
	cancel()
	resp.Body.Close()
	// The next request is served: the replica is not held by the first.
	resp2, b := post(t, url+"/v1/completions", `{"model":"llama-3.1-8b","prompt":[9,9],"max_tokens":2}`)
	if resp2.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp2.StatusCode, b)
	}
	oc := stop()
	rs := served.all()
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	r := rs[0]
	if r.Status != trace.StatusTimedOut || !strings.HasPrefix(r.DropReason, "client disconnected after ") ||
		r.GeneratedTokens < 3 || r.GeneratedTokens >= 100000 {
		t.Fatalf("cancelled request: %s (%s), %d tokens generated", r.Status, r.DropReason, r.GeneratedTokens)
	}
	if rs[1].Status != trace.StatusCompleted {
		t.Fatalf("second request: %s", rs[1].Status)
	}
	if oc.Summary.TimedOut != 1 || oc.Summary.Completed != 1 || oc.Unfinished != 0 {
		t.Fatalf("summary %+v", oc)
	}
}

// Close with requests in flight: those the drain does not see finish are
// written unfinished and their clients get an error event.
func TestCloseCutsInFlight(t *testing.T) {
	served := &collector{}
	s, url, _ := start(t, testCluster(t, 1), served)
	got := make(chan string, 1)
	go func() {
		_, b := post(t, url+"/v1/completions", `{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":100000,"stream":true}`)
		got <- string(b)
	}()
	time.Sleep(300 * time.Millisecond) // the request is streaming (100,000 tokens take minutes)
	oc, err := s.Close(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	rs := served.all()
	if len(rs) != 1 || rs[0].Status != trace.StatusUnfinished || oc.Unfinished != 1 {
		t.Fatalf("results %+v, outcome %+v", rs, oc)
	}
	if !strings.Contains(b, `"error"`) || strings.Contains(b, "[DONE]") {
		t.Fatalf("the client was not told: %s", b)
	}
	resp, body := post(t, url+"/v1/completions", `{"model":"llama-3.1-8b","prompt":[1],"max_tokens":1}`)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after Close: HTTP %d %s", resp.StatusCode, body)
	}
}

func TestBlockHashes(t *testing.T) {
	a := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	b := []uint64{1, 2, 3, 4, 5, 6, 0, 8, 9}
	ha, hb := blockHashes(a, 2), blockHashes(b, 2)
	if len(ha) != 4 || len(hb) != 4 {
		t.Fatalf("%d and %d hashes for 9 tokens in blocks of 2: want 4 (full blocks only)", len(ha), len(hb))
	}
	for i := range ha {
		if same := ha[i] == hb[i]; same != (i < 3) {
			t.Fatalf("block %d: shared %v, want %v", i, same, i < 3)
		}
	}
	// Chained: an equal block after different ones is a different hash.
	c := []uint64{0, 2, 3, 4}
	if hc := blockHashes(c, 2); hc[1] == ha[1] {
		t.Fatal("block 1 hashed without its prefix")
	}
	if blockHashes(a[:1], 2) != nil {
		t.Fatal("a partial block has a hash")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":[1,2,3],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"min_tokens":4,"ignore_eos":true}`,
		`{"model":"m","messages":[{"role":"user","content":"a b c"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_completion_tokens":2}`,
		`{"model":"m","prompt":[[1]],"n":1}`, `{"model":"m","prompt":"x"}`, `[]`, `{`, `{"model":1}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, chat bool) {
		p, err := parse(data, chat, 16, 256)
		if err != nil {
			if _, ok := err.(*badRequest); !ok {
				t.Fatalf("error %T %v: not a bad request", err, err)
			}
			return
		}
		if p.input < 1 || p.output < 1 || p.model == "" || len(p.hashes) != int(p.input)/16 {
			t.Fatalf("parsed %+v", p)
		}
	})
}

// A request the router's admission rejects is a 429 with its reason: one
// request running (max_num_seqs 1), one waiting, the third rejected.
func TestRejectedIs429(t *testing.T) {
	cfg := testCluster(t, 1)
	cfg.Router.Admission, cfg.Router.QueueLimit = "queue-limit", 1
	cfg.Engine.MaxNumSeqs = 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	served := &collector{}
	s, url, stop := start(t, cfg, served)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
		strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":100000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("first request: HTTP %d", resp.StatusCode)
	}
	// The second waits behind it (no answer until the first ends).
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
			strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":10}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.idMu.Lock()
		n := s.idN
		s.idMu.Unlock()
		if n >= 2 {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // it reaches the cluster
	r2, b := post(t, url+"/v1/completions", `{"model":"llama-3.1-8b","prompt":[4,5],"max_tokens":2}`)
	var e apiError
	json.Unmarshal(b, &e)
	if r2.StatusCode != http.StatusTooManyRequests || !strings.Contains(e.Error.Message, "rejected: queue-limit") {
		t.Fatalf("HTTP %d %s; want 429 with the admission's reason", r2.StatusCode, b)
	}
	cancel()
	stop()
	if rs := served.all(); len(rs) != 3 || rs[0].Status != trace.StatusRejected {
		t.Fatalf("results %+v", rs)
	}
}

// With several deployments, the request's model picks one; /v1/models
// lists them all.
func TestModelRouting(t *testing.T) {
	cfg, err := config.Load("testdata/two-models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served := &collector{}
	s, url, stop := start(t, cfg, served)
	if got := strings.Join(s.Models(), ","); got != "llama-3.1-8b,qwen3-14b" {
		t.Fatalf("models %s", got)
	}
	for _, m := range []string{"qwen3-14b", "llama-3.1-8b", "Qwen/Qwen3-14B"} {
		if resp, b := post(t, url+"/v1/completions", `{"model":"`+m+`","prompt":[1,2],"max_tokens":2}`); resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d %s", m, resp.StatusCode, b)
		}
	}
	stop()
	var deps []string
	for _, r := range served.all() {
		deps = append(deps, r.Deployment)
	}
	if got := strings.Join(deps, ","); got != "qwen14b,llama8b,qwen14b" {
		t.Fatalf("deployments %s", got)
	}
}

// Each token shows at the end of the step that produced it plus the
// per-token overhead α₂ of all the tokens streamed so far, as the engine
// stamps the first and last ones: with 20 ms steps and α₂ = 10 ms, tokens
// are 30 ms apart (not 20 ms, then a last gap of 70 ms).
func TestClosedLoopTokenTimesWithAlpha2(t *testing.T) {
	if raceEnabled {
		t.Skip("timing is not measurable under the race detector")
	}
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the timing tests on their own, after the others")
	}
	cfg := testCluster(t, 1)
	cfg.Latency = config.Latency{Mode: "linear", Beta: []float64{20000, 0, 0}, Alpha: []float64{0, 0, 10000}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	_, url, _ := start(t, cfg, &collector{})
	var last string
	for attempt := 1; attempt <= 3; attempt++ {
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":6,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		var times []time.Time
		sse := load.NewSSE(resp.Body, 1<<20)
		for {
			ev, err := sse.Next()
			if err != nil || string(ev.Data) == "[DONE]" {
				break
			}
			times = append(times, time.Now())
		}
		resp.Body.Close()
		if len(times) != 6 {
			t.Fatalf("%d chunks, want 6", len(times))
		}
		ok := true
		var gaps []string
		for i := 1; i < len(times); i++ {
			g := times[i].Sub(times[i-1])
			gaps = append(gaps, g.Round(100*time.Microsecond).String())
			if g < 26*time.Millisecond || g > 36*time.Millisecond {
				ok = false
			}
		}
		last = strings.Join(gaps, " ")
		t.Logf("attempt %d: gaps %s", attempt, last)
		if ok {
			return
		}
	}
	skipIfOverloaded(t, last)
	t.Fatalf("token gaps %s; want 30 ms ± a few", last)
}

// blis-serve decides with the run's policy bundle, as blis-sim does: a
// cluster YAML whose policy key names a bundle that rejects long prompts
// answers them 429 with the bundle's reason; without it, 200.
func TestPolicyBundleDecides(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("short-only.yaml", `id: short-only
admission:
  kind: decision_tree
  tree:
    if: "request.input_tokens > 4"
    then: {admit: reject, reason: "prompt over 4 tokens"}
    else: {admit: admit}
`)
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{"latency: {mode: roofline}\n", http.StatusOK},
		{"latency: {mode: roofline}\npolicy: short-only.yaml\n", http.StatusTooManyRequests},
	} {
		cfg, err := config.Load(write("cluster.yaml", tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, url, stop := start(t, cfg, &collector{})
		resp, b := post(t, url+"/v1/completions", `{"model":"llama-3.1-8b","prompt":[1,2,3,4,5,6],"max_tokens":2}`)
		stop()
		if resp.StatusCode != tc.want {
			t.Fatalf("%q: HTTP %d %s, want %d", tc.yaml, resp.StatusCode, b, tc.want)
		}
		if tc.want == http.StatusTooManyRequests && !strings.Contains(string(b), "prompt over 4 tokens") {
			t.Fatalf("429 without the policy's reason: %s", b)
		}
	}
}
