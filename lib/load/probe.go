package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/blis-sim/blis/lib/trace"
)

// ProbeError says the server cannot be load-tested as asked (unreachable,
// not OpenAI-compatible, refusing the key or the model): retrying the same
// command will not help, so tools exit with status 2.
type ProbeError struct{ Msg string }

func (e *ProbeError) Error() string { return e.Msg }

// BadInput marks the error for cliutil's exit status.
func (e *ProbeError) BadInput() bool { return true }

// Mode is an auto/on/off switch.
type Mode string

const (
	ModeAuto Mode = "auto"
	ModeOn   Mode = "on"
	ModeOff  Mode = "off"
)

// ProbeResult is what the probe found out.
type ProbeResult struct {
	Models []string // GET /models (nil when the server lists none)
	Model  string   // the model the session will name
	Ext    Extensions
	Usage  bool     // the probe's stream reported token usage
	Notes  []string // what was detected, for the user
}

const probeMaxTokens = 8

// ProbeWait is how long the probe retries a server that refuses
// connections (one that is still starting) before saying it cannot reach
// it.
var ProbeWait = 10 * time.Second

// Probe checks, before anything of the session is sent, that target is an
// OpenAI-compatible server that streams completions on the chosen API,
// picks the model (target.Model, or the only one GET /models lists) and
// finds out which extensions it accepts: vLLM's min_tokens/ignore_eos
// (ignoreEOS auto: sent unless the server rejects them; on: required; off:
// not sent) and stream_options.include_usage. It sends one GET /models
// and one or a few short completions.
func Probe(ctx context.Context, hc *http.Client, target Target, ignoreEOS Mode) (ProbeResult, error) {
	var pr ProbeResult
	base := strings.TrimRight(target.URL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return pr, &ProbeError{fmt.Sprintf("--url %q: expected an http:// or https:// API base, e.g. http://localhost:8000/v1", target.URL)}
	}
	pr.Models, err = listModels(ctx, hc, &target)
	if err != nil {
		return pr, err
	}
	switch {
	case target.Model != "":
		if pr.Models != nil && !contains(pr.Models, target.Model) {
			return pr, &ProbeError{fmt.Sprintf("--model %s: %s/models does not list it (it lists: %s)", target.Model, base, strings.Join(pr.Models, ", "))}
		}
	case len(pr.Models) == 1:
		target.Model = pr.Models[0]
		pr.Notes = append(pr.Notes, "model: "+target.Model+" (the only one the server lists)")
	case len(pr.Models) > 1:
		return pr, &ProbeError{fmt.Sprintf("the server lists %d models (%s): choose one with --model", len(pr.Models), strings.Join(pr.Models, ", "))}
	default:
		return pr, &ProbeError{fmt.Sprintf("%s/models lists no model: name one with --model", base)}
	}
	pr.Model = target.Model

	target.Ext = Extensions{IgnoreEOS: ignoreEOS != ModeOff, Usage: true}
	for attempt := 0; attempt < 3; attempt++ {
		o, err := probeOnce(ctx, hc, &target)
		if err != nil {
			return pr, err
		}
		if o.status == trace.StatusCompleted {
			pr.Ext, pr.Usage = target.Ext, o.hasUsage
			break
		}
		low := strings.ToLower(o.reason)
		rejects := func(words ...string) bool {
			if o.code != http.StatusBadRequest && o.code != http.StatusUnprocessableEntity {
				return false
			}
			for _, w := range words {
				if strings.Contains(low, w) {
					return true
				}
			}
			return false
		}
		switch {
		case target.Ext.IgnoreEOS && rejects("min_tokens", "ignore_eos", "extra") && ignoreEOS == ModeAuto:
			target.Ext.IgnoreEOS = false
			pr.Notes = append(pr.Notes, "the server rejects vLLM's min_tokens/ignore_eos ("+o.reason+"): output lengths are only capped by max_tokens")
			continue
		case target.Ext.IgnoreEOS && rejects("min_tokens", "ignore_eos"):
			return pr, &ProbeError{fmt.Sprintf("--ignore-eos on: the server rejects min_tokens/ignore_eos: %s", o.reason)}
		case target.Ext.Usage && rejects("stream_options", "include_usage"):
			target.Ext.Usage = false
			pr.Notes = append(pr.Notes, "the server rejects stream_options.include_usage ("+o.reason+")")
			continue
		}
		return pr, &ProbeError{probeFailure(&target, o)}
	}
	if pr.Ext.IgnoreEOS {
		pr.Notes = append(pr.Notes, "output length: max_tokens with min_tokens and ignore_eos (vLLM's extensions, accepted)")
	} else if ignoreEOS == ModeOff {
		pr.Notes = append(pr.Notes, "output length: max_tokens only (--ignore-eos off)")
	}
	if !pr.Usage {
		pr.Notes = append(pr.Notes, "the server reports no token usage: generated_tokens counts streamed chunks and input_tokens stays as planned")
	}
	return pr, nil
}

// probeOnce sends one short streamed completion.
func probeOnce(ctx context.Context, hc *http.Client, t *Target) (*outcome, error) {
	ids := []uint32{DefaultTokenLo, DefaultTokenLo + 1, DefaultTokenLo + 2, DefaultTokenLo + 3}
	var text []byte
	if t.API == Chat {
		text = (&Prompts{}).AppendWords(nil, ids)
	}
	body := appendBody(nil, t.API, jsonString(t.Model), ids, text, probeMaxTokens, t.Ext)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	o := newOutcome(nil)
	send(cctx, hc, t, NewClock(), body, o, false, 1<<20)
	if o.status == trace.StatusCompleted && !o.sawCompletion {
		o.status, o.reason = trace.StatusFailed, "the stream carried no completion chunk (no choices)"
	}
	if o.status == trace.StatusFailed && o.code == 0 && strings.HasPrefix(o.reason, "connection: ") {
		return nil, &ProbeError{fmt.Sprintf("cannot reach %s: %s", t.Endpoint(), strings.TrimPrefix(o.reason, "connection: "))}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return o, nil
}

func probeFailure(t *Target, o *outcome) string {
	where := "POST " + t.Endpoint()
	switch {
	case o.code == http.StatusNotFound || o.code == http.StatusMethodNotAllowed:
		hint := "is --url the API base (ending in /v1)?"
		if t.API == Completions {
			hint += " A server with only chat completions needs --api chat."
		}
		return fmt.Sprintf("%s: %s: not an OpenAI-compatible %s endpoint; %s", where, o.reason, t.API, hint)
	case o.code == http.StatusUnauthorized || o.code == http.StatusForbidden:
		return fmt.Sprintf("%s: %s: the server wants an API key (give the name of the environment variable holding it with --api-key-env)", where, o.reason)
	case o.code == http.StatusBadRequest && t.API == Completions:
		return fmt.Sprintf("%s: %s (a server that does not take token-id prompts needs --api chat)", where, o.reason)
	case o.status == trace.StatusTimedOut:
		return fmt.Sprintf("%s: no complete answer to a %d-token completion within 60 s", where, probeMaxTokens)
	}
	return fmt.Sprintf("%s: not an OpenAI-compatible streaming answer: %s", where, o.reason)
}

// listModels reads GET /models: nil when the server has no such endpoint
// or answers something else (some servers do not list models).
func listModels(ctx context.Context, hc *http.Client, t *Target) ([]string, error) {
	base := strings.TrimRight(t.URL, "/")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return nil, &ProbeError{fmt.Sprintf("--url %q: %v", t.URL, err)}
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	// A server started just before (in the background, as in the
	// README) may not listen yet: connection refused is retried for
	// ProbeWait.
	deadline := time.Now().Add(ProbeWait)
	resp, err := hc.Do(req)
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		resp, err = hc.Do(req.Clone(cctx))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ProbeError{fmt.Sprintf("cannot reach %s: %s (is the server running, and --url its API base, e.g. http://localhost:8000/v1?)", base, describeNetErr(err))}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return nil, &ProbeError{fmt.Sprintf("GET %s/models: HTTP %d: %s: the server wants an API key (give the name of the environment variable holding it with --api-key-env)", base, resp.StatusCode, errorText(b))}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &list) != nil {
		return nil, nil
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" && !contains(ids, m.ID) {
			ids = append(ids, m.ID)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
