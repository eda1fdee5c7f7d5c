package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/load"
	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/trace"
)

// runApp runs blis-load in process: exit status and stderr.
func runApp(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := app()
	a.Writer = &out
	code := cliutil.RunArgs(a, append([]string{"blis-load"}, args...), &errb)
	return code, errb.String()
}

func writeRequests(t *testing.T, dir string, reqs []trace.Request) string {
	t.Helper()
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	p := filepath.Join(dir, "requests.arrow")
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

func req(id string, arrival int64, in, out int32, deps ...string) trace.Request {
	r := trace.NewRequest(id)
	r.InputTokens, r.OutputTokens = in, out
	if len(deps) > 0 {
		r.DependsOn, r.DelayUS = deps, 2000
	} else {
		r.ArrivalUS = arrival
	}
	return r
}

// sessions is a small multi-turn workload: 6 sessions of 3 turns.
func sessions() []trace.Request {
	var reqs []trace.Request
	for s := 0; s < 6; s++ {
		id := fmt.Sprintf("s%d", s)
		reqs = append(reqs, req(id+"-0", int64(s)*4000, 40, 4))
		reqs = append(reqs, req(id+"-1", 0, 60, 3, id+"-0"))
		reqs = append(reqs, req(id+"-2", 0, 80, 2, id+"-1"))
	}
	return reqs
}

func readResults(t *testing.T, path string) []trace.Result {
	t.Helper()
	src, err := trace.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	res, err := trace.ReadAllResults(src)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Bad usage and bad input exit 2 with a message saying what is wrong,
// and write nothing.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	srv := fakellm.New(fakellm.Config{})
	defer srv.Close()
	good := writeRequests(t, dir, sessions())
	toolOnly := trace.NewRequest("t")
	toolOnly.Kind, toolOnly.ArrivalUS, toolOnly.DelayUS = trace.KindTool, 0, 10
	failedOnly := req("f", 0, 10, 2)
	failedOnly.SourceStatus = trace.SourceFailed
	noRows := writeRequests(t, t.TempDir(), []trace.Request{toolOnly, failedOnly})
	dangling := writeRequests(t, t.TempDir(), []trace.Request{req("a", 0, 8, 1), req("b", 0, 8, 1, "nope")})
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>hello</html>"))
	}))
	defer html.Close()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	defer func(w time.Duration) { load.ProbeWait = w }(load.ProbeWait)
	load.ProbeWait = 200 * time.Millisecond // a dead server is retried this long
	out := filepath.Join(dir, "out.arrow")
	u := srv.URL0()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{good}, "--url: required"},
		{[]string{"--url", u, "--api", "responses", good}, `--api: expected completions or chat, found "responses"`},
		{[]string{"--url", u, "--concurrency", "0", good}, "--concurrency: expected a number of requests in flight ≥ 1, found 0"},
		{[]string{"--url", u, "--rate", "0", good}, "--rate: expected requests per second in (0, 1e6], found 0"},
		{[]string{"--url", u, "--rate", "5", "--offline", good}, "--rate and --offline are different schedules"},
		{[]string{"--url", u, "--rate", "5", "--speedup", "2", good}, "--speedup scales the table's timing"},
		{[]string{"--url", u, "--speedup", "0", good}, "--speedup: expected a factor > 0"},
		{[]string{"--url", u, "--duration", "soon", good}, `--duration: expected a duration such as 90s`},
		{[]string{"--url", u, "--limit", "0", good}, "--limit: expected a number of rows ≥ 1"},
		{[]string{"--url", u, "--ignore-eos", "maybe", good}, "--ignore-eos: expected auto, on or off"},
		{[]string{"--url", u, "--api-key-env", "sk-live-123", good}, "--api-key-env: expected the name of an environment variable"},
		{[]string{"--url", u, "--vocab-range", "5:5", good}, "--vocab-range: expected LO:HI"},
		{[]string{"--url", u, good, "--rate", "3"}, "flags go before the input path"},
		{[]string{"--url", u, filepath.Join(dir, "missing.arrow")}, "missing.arrow"},
		{[]string{"--url", u, noRows}, "no usable rows: 2 rows: 0 llm requests to send, 1 tool steps, 1 failed in their source (not sent)"},
		{[]string{"--url", u, dangling}, `row 2 (request b): column depends_on: "nope" not found among earlier rows`},
		{[]string{"--url", dead, good}, "cannot reach " + dead + ": connection refused"},
		{[]string{"--url", html.URL + "/v1", "--model", "m", good}, "not an OpenAI-compatible streaming answer"},
		{[]string{"--url", u, "--model", "gpt-9", good}, "--model gpt-9: " + u + "/models does not list it"},
	} {
		code, stderr := runApp(t, append([]string{"-q", "-o", out}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: wrote %s", tc.args, out)
		}
	}
}

// A session against the in-repo server, end to end: the results open in
// blis-report, compare with blis-sim's on the same requests, and read back
// as a recorded run for blis-calibrate --requests; the API key stays out of
// the table.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	srv := fakellm.New(fakellm.Config{TTFT: 3 * time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	in := writeRequests(t, dir, sessions())
	real, chunks := filepath.Join(dir, "real.arrow"), filepath.Join(dir, "chunks.parquet")
	t.Setenv("BLIS_TEST_KEY", "sk-secret-value")
	code, stderr := runApp(t, "--url", srv.URL0(), "--api-key-env", "BLIS_TEST_KEY", "--warmup", "2", "--seed", "9",
		"-o", real, "--chunks", chunks, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"18 rows: 18 llm requests to send", "model: fake-model (the only one the server lists)",
		"warm-up: 2 of 2 requests completed", "18 rows: 18 completed, 0 failed", "sent − due (how late requests went): p50", "requests sent in ",
		"blis-load: 18/18 rows (100%), sent 18 of 18 requests ("} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	b, _ := os.ReadFile(real)
	if bytes.Contains(b, []byte("sk-secret-value")) {
		t.Fatal("the API key is in the results")
	}
	res := readResults(t, real)
	if len(res) != 18 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Status != trace.StatusCompleted || r.RecordedTTFTUS != r.TTFTUS || r.RecordedE2EUS != r.E2EUS || r.Deployment != "fake-model" || r.ReplicaID != "" {
			t.Errorf("%s: %+v", r.ID, r)
		}
	}
	src, _ := trace.Open(real, nil)
	md := src.Meta()
	src.Close()
	if md.Table() != trace.TableResults || md.Get(trace.MetaSorted) != "" || md.Get("blis.load.model") != "fake-model" ||
		md.Get("blis.load.extensions") != "min_tokens,ignore_eos,include_usage" || len(md.Provenance) != 1 || md.Provenance[0].Tool != "blis-load" {
		t.Errorf("metadata %+v", md)
	}

	rep, err := report.Build([]string{real}, report.Options{})
	if err != nil {
		t.Fatalf("blis-report cannot read it: %v", err)
	}
	if rep.Inputs[0].Rows != 18 {
		t.Errorf("blis-report read %d rows", rep.Inputs[0].Rows)
	}

	// blis-sim on the same requests, then blis-report --compare real sim.
	reqs := sessions()
	cfg := config.Default()
	models, _, err := engine.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	sim := filepath.Join(dir, "sim.arrow")
	s := trace.ResultsSchema(trace.NewMeta())
	sink, _ := trace.Create(sim, nil, s)
	rw := trace.NewResultWriter(sink, s)
	if _, err := engine.Run(cfg, models, engine.SliceSource(reqs), rw, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	if _, err := report.Build([]string{sim}, report.Options{Compare: real}); err != nil {
		t.Fatalf("blis-report --compare: %v", err)
	}

	// blis-calibrate --requests reads it as a recorded run.
	rec, err := measure.ReadRunRequests(real, "")
	if err != nil {
		t.Fatalf("blis-calibrate's reader: %v", err)
	}
	if len(rec) != 18 || rec[0].RecordedTTFTUS <= 3000 {
		t.Errorf("recorded run: %d requests, first TTFT %d µs", len(rec), rec[0].RecordedTTFTUS)
	}

	// The event log: 18 × (due, sent, chunks, done).
	csrc, err := trace.Open(chunks, nil)
	if err != nil {
		t.Skipf("Parquet not linked: %v", err)
	}
	defer csrc.Close()
	if csrc.Meta().Table() != trace.TableChunks {
		t.Errorf("chunks table kind %q", csrc.Meta().Table())
	}
}

// SIGINT stops issuing, drains, and writes what the session has, the rest
// marked unfinished; the real binary, a real signal.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "blis-load")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := fakellm.New(fakellm.Config{TTFT: 5 * time.Millisecond, ITL: 20 * time.Millisecond})
	defer srv.Close()
	var reqs []trace.Request
	for i := 0; i < 200; i++ {
		reqs = append(reqs, req(fmt.Sprintf("r%03d", i), int64(i)*10000, 16, 50)) // 1 s each, 100/s
	}
	in := writeRequests(t, dir, reqs)
	out := filepath.Join(dir, "real.arrow")
	cmd := exec.Command(bin, "--url", srv.URL0(), "--drain", "300ms", "-o", out, in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 10 s after SIGINT\n%s", stderr.String())
	}
	for _, want := range []string{"SIGINT: no more requests; waiting up to 300ms", "interrupted (SIGINT)", "rows of the table were not reached"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	res := readResults(t, out)
	n := map[string]int{}
	for _, r := range res {
		n[r.Status+": "+r.DropReason]++
	}
	if len(res) == 0 || len(res) == len(reqs) || n["unfinished: in flight when the drain timeout (300ms) ended"] == 0 {
		t.Errorf("%d results: %v", len(res), n)
	}
}
