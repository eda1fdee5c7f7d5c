package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/blis-sim/blis/internal/loadavg"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/trace"
)

// mockLLMVersion is the @dwmkerr/mock-llm release .ci/run installs.
const mockLLMVersion = "0.1.29"

// mockLLMPath finds mock-llm's entry point: $BLIS_MOCK_LLM, else where
// .ci/run installs it. In CI (BLIS_CI=1) a missing server is a failure.
func mockLLMPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BLIS_MOCK_LLM")
	if p == "" {
		cache := os.Getenv("BLIS_CACHE")
		if cache == "" {
			if c, err := os.UserCacheDir(); err == nil {
				cache = filepath.Join(c, "blis")
			}
		}
		p = filepath.Join(cache, "mock-llm-"+mockLLMVersion, "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	}
	_, err := os.Stat(p)
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		msg := fmt.Sprintf("@dwmkerr/mock-llm is not installed at %s or node is missing (%v, %v): .ci/run installs it (npm install --prefix DIR @dwmkerr/mock-llm@%s)", p, err, nodeErr, mockLLMVersion)
		if os.Getenv("BLIS_CI") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// mockLLMConfig: a six-word answer streamed in 7 chunks 5 ms apart, an
// error for requests asking for 13 tokens, one model listed.
const mockLLMConfig = `streaming:
  chunkSize: 4
  chunkIntervalMs: 5
rules:
  - path: "/v1/chat/completions"
    method: "POST"
    match: "@"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "{{jmes request body.model}}",
         "choices": [{"message": {"role": "assistant", "content": "one two three four five six"}, "finish_reason": "stop"}]}
  - path: "/v1/chat/completions"
    method: "POST"
    match: "body.max_tokens == ` + "`13`" + `"
    response:
      status: 500
      content: '{"error": {"message": "mock failure", "type": "server_error", "code": 500}}'
  - path: "/v1/models"
    method: "GET"
    response:
      status: 200
      content: '{"object": "list", "data": [{"id": "mock-model", "object": "model"}]}'
`

type mockLLM struct {
	url  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []string
	done chan struct{}
}

// posts counts the chat completions the server logged.
func (m *mockLLM) posts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.log {
		if strings.TrimSpace(l) == "POST /v1/chat/completions" {
			n++
		}
	}
	return n
}

func startMockLLM(t *testing.T) *mockLLM {
	main := mockLLMPath(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mock-llm.yaml")
	if err := os.WriteFile(cfg, []byte(mockLLMConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := &mockLLM{url: fmt.Sprintf("http://127.0.0.1:%d/v1", port), done: make(chan struct{})}
	m.cmd = exec.Command("node", main, "--config", cfg)
	m.cmd.Dir = dir
	m.cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "HOST=127.0.0.1")
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.cmd.Stdout
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.mu.Lock()
			m.log = append(m.log, sc.Text())
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		m.cmd.Process.Kill() // the one process this test started
		m.cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return m
			}
		}
		if time.Now().After(deadline) {
			m.mu.Lock()
			defer m.mu.Unlock()
			t.Fatalf("mock-llm did not come up on port %d: %v\n%s", port, err, strings.Join(m.log, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A server this project did not write, from npm: @dwmkerr/mock-llm
// streams chat completions over SSE. Each of the three schedules sends
// every row once, dependents after their parents, and the results open in
// blis-report.
func TestAgainstMockLLM(t *testing.T) {
	if os.Getenv("BLIS_SKIP_TIMING") == "1" {
		t.Skip("make test runs the tests that check issue times on their own, after the others")
	}
	m := startMockLLM(t)
	dir := t.TempDir()
	reqs := sessions() // 6 sessions × 3 turns
	boom := req("boom", 30000, 20, 13)
	reqs = append(reqs, boom, req("after-boom", 0, 20, 2, "boom"))
	in := writeRequests(t, dir, reqs)
	for i, tc := range []struct {
		name string
		args []string
	}{
		{"trace", []string{"--speedup", "0.25"}}, // roots 16 ms apart
		{"poisson", []string{"--rate", "50", "--seed", "3"}},
		{"closed loop", []string{"--concurrency", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The send order is a wall-clock outcome: a machine loaded past
			// its cores can wake a request's goroutine tens of ms late, so
			// an order broken that way is a failed attempt, not a failure.
			var order []string
			for attempt := 1; attempt <= 3; attempt++ {
				if order = runSchedule(t, m, dir, fmt.Sprintf("%d-%d", i, attempt), in, reqs, tc.name, tc.args); len(order) == 0 || t.Failed() {
					return
				}
				t.Logf("attempt %d: sends out of order: %s", attempt, strings.Join(order, "; "))
			}
			if l, over := loadavg.Overloaded(); over {
				t.Logf("machine overloaded (load average %.1f on %d cores): sends out of order in every attempt", l, runtime.NumCPU())
				return
			}
			t.Errorf("sends out of order in every attempt: %s", strings.Join(order, "; "))
		})
	}
}

// runSchedule runs blis-load once against mock-llm with args and checks
// the results; it returns the send-order violations (wall clock) rather
// than failing on them.
func runSchedule(t *testing.T, m *mockLLM, dir, tag, in string, reqs []trace.Request, name string, args []string) (order []string) {
	t.Helper()
	before := m.posts()
	out := filepath.Join(dir, fmt.Sprintf("real%s.arrow", tag))
	chunks := filepath.Join(dir, fmt.Sprintf("chunks%s.arrow", tag))
	argv := append([]string{"--url", m.url, "--api", "chat", "-o", out, "--chunks", chunks}, args...)
	code, stderr := runApp(t, append(argv, in)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res := readResults(t, out)
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d rows", len(res), len(reqs))
	}
	by := map[string]trace.Result{}
	for _, r := range res {
		by[r.ID] = r
	}
	for _, r := range reqs {
		got := by[r.ID]
		switch r.ID {
		case "boom":
			if got.Status != trace.StatusFailed || !strings.Contains(got.DropReason, "mock failure") {
				t.Errorf("boom: %s %q", got.Status, got.DropReason)
			}
			continue
		case "after-boom":
			if got.Status != trace.StatusDropped || got.DropReason != "dependency boom failed" {
				t.Errorf("after-boom: %s %q", got.Status, got.DropReason)
			}
			continue
		}
		// mock-llm echoes a fixed answer in 7 chunks whatever
		// max_tokens says, and reports no usage.
		if got.Status != trace.StatusCompleted || got.GeneratedTokens != 7 || got.TTFTUS <= 0 || got.E2EUS < 30000 {
			t.Errorf("%s: %s %q, %d chunks, ttft %d, e2e %d", r.ID, got.Status, got.DropReason, got.GeneratedTokens, got.TTFTUS, got.E2EUS)
		}
		for _, d := range r.DependsOn {
			if p := by[d]; got.ArrivalUS < p.FinishedUS+r.DelayUS {
				t.Errorf("%s sent at %d µs, before %s finished at %d + %d µs", r.ID, got.ArrivalUS, d, p.FinishedUS, r.DelayUS)
			}
		}
	}
	// Request counts: the probe and every row sent, as mock-llm
	// logged them (its log may trail the last response by a moment).
	want := len(reqs) - 1 + 1 // all but after-boom, plus the probe
	deadline := time.Now().Add(5 * time.Second)
	for m.posts()-before != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := m.posts() - before; got != want {
		t.Errorf("mock-llm logged %d chat completions, want %d", got, want)
	}
	// Ordering: never sent before due, and in the order they
	// were due (requests due 10 ms or more apart); at most 2 in
	// flight in the closed loop.
	due := dueTimes(t, chunks)
	var sent []trace.Result
	for _, r := range res {
		if r.Status != trace.StatusDropped {
			sent = append(sent, r)
			if r.ArrivalUS < due[r.ID] {
				t.Errorf("%s sent at %d µs, due at %d", r.ID, r.ArrivalUS, due[r.ID])
			}
		}
	}
	sort.Slice(sent, func(a, b int) bool { return sent[a].ArrivalUS < sent[b].ArrivalUS })
	for a := range sent {
		for b := a + 1; b < len(sent) && name != "closed loop"; b++ {
			if due[sent[a].ID] > due[sent[b].ID]+10000 {
				order = append(order, fmt.Sprintf("%s (due %d µs) sent before %s (due %d µs)", sent[a].ID, due[sent[a].ID], sent[b].ID, due[sent[b].ID]))
			}
		}
	}
	if name == "trace" {
		for _, r := range reqs {
			if len(r.DependsOn) == 0 && due[r.ID] != r.ArrivalUS*4 {
				t.Errorf("%s due at %d µs, want arrival_us / 0.25 = %d", r.ID, due[r.ID], r.ArrivalUS*4)
			}
		}
	}
	if name == "closed loop" {
		// Roots in table order as slots free up (two given the same
		// slot-time at the start may go either way).
		var roots []trace.Result
		for _, r := range sent {
			if len(r.DependsOn) == 0 {
				roots = append(roots, r)
			}
		}
		for a := range roots {
			for b := a + 1; b < len(roots); b++ {
				if indexIn(reqs, roots[a].ID) > indexIn(reqs, roots[b].ID) && roots[b].ArrivalUS-roots[a].ArrivalUS > 1000 {
					order = append(order, fmt.Sprintf("closed loop sent %s at %d µs before %s at %d µs, against the table's order", roots[a].ID, roots[a].ArrivalUS, roots[b].ID, roots[b].ArrivalUS))
				}
			}
		}
		if peak := maxOverlap(res); peak > 2 {
			t.Errorf("%d requests in flight at once with --concurrency 2", peak)
		}
	}
	if _, err := report.Build([]string{out}, report.Options{}); err != nil {
		t.Fatalf("blis-report cannot read the results: %v", err)
	}
	return order
}

// maxOverlap is the most requests in flight at once (sent to end).
func maxOverlap(res []trace.Result) int {
	type ev struct {
		t int64
		d int
	}
	var evs []ev
	for _, r := range res {
		if r.ArrivalUS != trace.Null && r.FinishedUS != trace.Null && r.Kind == trace.KindLLM && r.Status != trace.StatusDropped {
			evs = append(evs, ev{r.ArrivalUS, 1}, ev{r.FinishedUS, -1})
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || evs[i].t == evs[j].t && evs[i].d < evs[j].d })
	n, peak := 0, 0
	for _, e := range evs {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// dueTimes reads the due events of a --chunks table.
func dueTimes(t *testing.T, path string) map[string]int64 {
	t.Helper()
	src, err := trace.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	due := map[string]int64{}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			return due
		}
		if err != nil {
			t.Fatal(err)
		}
		ids, ev, tus := rec.Column(0).(*array.String), rec.Column(1).(*array.String), rec.Column(2).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if ev.Value(i) == trace.EventDue {
				due[ids.Value(i)] = tus.Value(i)
			}
		}
	}
}

func indexIn(reqs []trace.Request, id string) int {
	for i := range reqs {
		if reqs[i].ID == id {
			return i
		}
	}
	return -1
}
