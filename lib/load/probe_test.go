package load

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/trace"
)

func probe(t *testing.T, tg Target, mode Mode) (ProbeResult, error) {
	t.Helper()
	return Probe(context.Background(), NewHTTPClient(4), tg, mode)
}

func TestProbeFindsOutWhatTheServerTakes(t *testing.T) {
	srv := fakellm.New(fakellm.Config{})
	defer srv.Close()
	pr, err := probe(t, Target{URL: srv.URL0(), API: Completions}, ModeAuto)
	if err != nil || pr.Model != "fake-model" || !pr.Ext.IgnoreEOS || !pr.Ext.Usage || !pr.Usage {
		t.Fatalf("%+v, %v", pr, err)
	}
	if _, err := probe(t, Target{URL: srv.URL0(), API: Chat, Model: "fake-model"}, ModeOff); err != nil {
		t.Fatal(err)
	}

	// OpenAI's own API rejects fields it does not know: auto falls back,
	// on refuses.
	strict := fakellm.New(fakellm.Config{RejectExtensions: true})
	defer strict.Close()
	pr, err = probe(t, Target{URL: strict.URL0(), API: Completions}, ModeAuto)
	if err != nil || pr.Ext.IgnoreEOS || !strings.Contains(strings.Join(pr.Notes, "\n"), "rejects vLLM's min_tokens/ignore_eos") {
		t.Fatalf("auto on a strict server: %+v, %v", pr, err)
	}
	if _, err := probe(t, Target{URL: strict.URL0(), API: Completions}, ModeOn); err == nil || !strings.Contains(err.Error(), "--ignore-eos on: the server rejects") {
		t.Fatalf("on on a strict server: %v", err)
	}
}

func TestProbeErrors(t *testing.T) {
	two := fakellm.New(fakellm.Config{Models: []string{"a", "b"}})
	defer two.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>"))
	}))
	defer html.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		w.Write([]byte(`{"error":{"message":"Incorrect API key provided."}}`))
	}))
	defer auth.Close()
	nostream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":[{"id":"m"}],"choices":[{"text":"hi"}]}`))
	}))
	defer nostream.Close()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	defer func(w time.Duration) { ProbeWait = w }(ProbeWait)
	ProbeWait = 300 * time.Millisecond

	for _, tc := range []struct {
		name string
		tg   Target
		want string
	}{
		{"unreachable", Target{URL: dead, API: Completions}, "cannot reach " + dead + ": connection refused"},
		{"not a URL", Target{URL: "localhost:8000", API: Completions}, "expected an http:// or https:// API base"},
		{"two models", Target{URL: two.URL0(), API: Completions}, "the server lists 2 models (a, b): choose one with --model"},
		{"unknown model", Target{URL: two.URL0(), API: Completions, Model: "c"}, "--model c: " + two.URL0() + "/models does not list it (it lists: a, b)"},
		{"html", Target{URL: html.URL + "/v1", API: Completions, Model: "m"}, "not an OpenAI-compatible streaming answer"},
		{"no completions", Target{URL: notFound.URL + "/v1", API: Completions, Model: "m"}, "HTTP 404"},
		{"no models and no --model", Target{URL: notFound.URL + "/v1", API: Chat}, "lists no model: name one with --model"},
		{"key", Target{URL: auth.URL + "/v1", API: Completions, Model: "m"}, "Incorrect API key provided.: the server wants an API key"},
		{"no stream", Target{URL: nostream.URL + "/v1", API: Completions}, "not an event stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := probe(t, tc.tg, ModeAuto)
			var pe *ProbeError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a ProbeError with %q", err, tc.want)
			}
		})
	}
}

// A server that ignores min_tokens/ignore_eos (ends at its EOS): output
// lengths differ from the plan, which the summary counts and output_tokens
// then holds.
func TestLengthNotForced(t *testing.T) {
	srv := fakellm.New(fakellm.Config{NaturalTokens: 3, TTFT: time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	reqs := []trace.Request{llm("a", 0, 16, 10), llm("b", 0, 16, 2)}
	sum, c, _ := session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingOffline})
	if sum.OutputDiffers != 0 {
		t.Fatalf("with ignore_eos accepted nothing differs; got %d", sum.OutputDiffers)
	}
	tab, _ := OpenTable(writeTable(t, reqs, true, 0), nil)
	defer tab.Close()
	st, _ := tab.Check(0, 0)
	c2 := &collector{}
	tg := Target{URL: srv.URL0(), API: Completions, Model: "fake-model", Ext: Extensions{Usage: true}}
	s := NewSession(tab, &st, &tg, NewHTTPClient(4), Options{Timing: TimingOffline, Results: c2, Prompts: Prompts{BlockSize: 16, Lo: 1000, Hi: 2000}})
	sum, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := c2.byID()
	if sum.OutputDiffers != 1 || res["a"].OutputTokens != 3 || res["a"].GeneratedTokens != 3 || res["b"].OutputTokens != 2 {
		t.Errorf("differs %d, a %d/%d, b %d", sum.OutputDiffers, res["a"].OutputTokens, res["a"].GeneratedTokens, res["b"].OutputTokens)
	}
	_ = c
}

// A server started in the background just before blis-load (the README's
// test server) may not listen yet: the probe waits for it instead of
// failing at once (issue 32, items 4 and 5).
func TestProbeWaitsForAServerStarting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := fakellm.NewUnstarted(fakellm.Config{})
	started := make(chan bool, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			started <- false // the port was taken meanwhile: the probe fails below
			return
		}
		srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		started <- true
	}()
	defer func() {
		if <-started {
			srv.Close()
		}
	}()
	pr, err := probe(t, Target{URL: "http://" + addr + "/v1", API: Completions}, ModeAuto)
	if err != nil || pr.Model != "fake-model" {
		t.Fatalf("%+v, %v", pr, err)
	}
}
