package fit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/blis-sim/blis/lib/trace"
)

// RunConfig is the engine configuration of a recorded run, from the
// llmservingsim meta.json (or flags). Zero fields mean "not recorded".
type RunConfig struct {
	Model               string
	Engine              string
	Version             string
	Device              string
	TP                  int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	KVBlocks            int
	BlockSize           int
	PrefixCaching       bool
}

type llmssMeta struct {
	Model        string `json:"model"`
	VLLMVersion  string `json:"vllm_version"`
	EngineKwargs struct {
		TP                  *int `json:"tensor_parallel_size"`
		MaxNumSeqs          *int `json:"max_num_seqs"`
		MaxNumBatchedTokens *int `json:"max_num_batched_tokens"`
	} `json:"engine_kwargs"`
	KVCache *struct {
		NumGPUBlocks        *int `json:"num_gpu_blocks"`
		BlockSize           *int `json:"block_size"`
		EnablePrefixCaching bool `json:"enable_prefix_caching"`
	} `json:"kv_cache"`
	Hardware *struct {
		DeviceName string `json:"device_name"`
	} `json:"hardware"`
}

// ReadRunMeta reads an llmservingsim meta.json. Unknown keys are allowed:
// the file carries vLLM's whole resolved config.
func ReadRunMeta(path string, r io.Reader) (RunConfig, error) {
	var m llmssMeta
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return RunConfig{}, &InputError{Path: path, Msg: "expected an llmservingsim meta.json object: " + err.Error()}
	}
	c := RunConfig{Model: m.Model, Engine: "vllm", Version: m.VLLMVersion}
	// Absent (or null) settings stay 0, the caller's default; a value
	// present must be positive.
	type setting struct {
		field  string
		v, dst *int
	}
	set := []setting{
		{"engine_kwargs.tensor_parallel_size", m.EngineKwargs.TP, &c.TP},
		{"engine_kwargs.max_num_seqs", m.EngineKwargs.MaxNumSeqs, &c.MaxNumSeqs},
		{"engine_kwargs.max_num_batched_tokens", m.EngineKwargs.MaxNumBatchedTokens, &c.MaxNumBatchedTokens},
	}
	if m.KVCache != nil {
		c.PrefixCaching = m.KVCache.EnablePrefixCaching
		set = append(set, setting{"kv_cache.num_gpu_blocks", m.KVCache.NumGPUBlocks, &c.KVBlocks},
			setting{"kv_cache.block_size", m.KVCache.BlockSize, &c.BlockSize})
	}
	for _, f := range set {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 {
			return c, &InputError{Path: path, Field: f.field, Msg: fmt.Sprintf("expected a positive integer, found %d", *f.v)}
		}
		*f.dst = *f.v
	}
	if m.Hardware != nil {
		c.Device = m.Hardware.DeviceName
	}
	return c, nil
}

type llmssRequest struct {
	ID        *string  `json:"request_id"`
	In        *int64   `json:"input_toks"`
	Out       *int64   `json:"output_toks"`
	Arrival   *float64 `json:"arrival_time"`
	Queued    *float64 `json:"queued_ts"`
	Scheduled *float64 `json:"scheduled_ts"`
	First     *float64 `json:"first_token_ts"`
	Last      *float64 `json:"last_token_ts"`
}

// ReadRunRequests reads llmservingsim's vllm/requests.jsonl. The timestamps
// queued/first/last are on vLLM's monotonic clock (arrival_time is wall
// clock, another base), so arrivals are queued_ts relative to the first one
// and TTFT = first_token − queued, as vLLM reports it. ITL is the mean gap
// (last − first)/(output − 1). Requests come back sorted by arrival.
func ReadRunRequests(path string, r io.Reader) ([]trace.Request, error) {
	type row struct {
		req    trace.Request
		queued float64
	}
	var rows []row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	line := 0
	seen := map[string]int{}
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var q llmssRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&q); err != nil {
			return nil, &InputError{Path: path, Line: line, Msg: "expected a JSON object: " + err.Error()}
		}
		miss := func(name string) error {
			return &InputError{Path: path, Line: line, Field: name, Msg: "expected a value, found none"}
		}
		switch {
		case q.ID == nil || *q.ID == "":
			return nil, miss("request_id")
		case q.In == nil:
			return nil, miss("input_toks")
		case q.Out == nil:
			return nil, miss("output_toks")
		case q.Queued == nil:
			return nil, miss("queued_ts")
		case q.First == nil:
			return nil, miss("first_token_ts")
		case q.Last == nil:
			return nil, miss("last_token_ts")
		}
		if prev, dup := seen[*q.ID]; dup {
			return nil, &InputError{Path: path, Line: line, Field: "request_id", Msg: fmt.Sprintf("expected a unique id, found %q again (first on line %d)", *q.ID, prev)}
		}
		seen[*q.ID] = line
		if *q.In <= 0 || *q.In > math.MaxInt32 {
			return nil, &InputError{Path: path, Line: line, Field: "input_toks", Msg: fmt.Sprintf("expected a positive token count, found %d", *q.In)}
		}
		if *q.Out <= 0 || *q.Out > math.MaxInt32 {
			return nil, &InputError{Path: path, Line: line, Field: "output_toks", Msg: fmt.Sprintf("expected a positive token count, found %d", *q.Out)}
		}
		ttft := *q.First - *q.Queued
		e2e := *q.Last - *q.Queued
		if !(ttft > 0) || !(e2e >= ttft) || math.IsInf(e2e, 0) {
			return nil, &InputError{Path: path, Line: line, Field: "first_token_ts", Msg: fmt.Sprintf("expected queued_ts < first_token_ts <= last_token_ts (seconds), found %g, %g, %g", *q.Queued, *q.First, *q.Last)}
		}
		if e2e > 30*86400 {
			return nil, &InputError{Path: path, Line: line, Field: "last_token_ts", Msg: fmt.Sprintf("expected seconds on one clock, found a %g s request (inconsistent units or clocks?)", e2e)}
		}
		req := trace.NewRequest(*q.ID)
		req.InputTokens, req.OutputTokens = int32(*q.In), int32(*q.Out)
		req.RecordedTTFTUS = int64(math.Round(ttft * 1e6))
		req.RecordedE2EUS = int64(math.Round(e2e * 1e6))
		if *q.Out > 1 {
			req.RecordedITLUS = int64(math.Round((e2e - ttft) / float64(*q.Out-1) * 1e6))
		}
		req.SourceRow = int64(line)
		rows = append(rows, row{req: req, queued: *q.Queued})
	}
	if err := sc.Err(); err != nil {
		return nil, &InputError{Path: path, Line: line + 1, Msg: err.Error()}
	}
	if len(rows) == 0 {
		return nil, &InputError{Path: path, Msg: "expected at least one request, found none"}
	}
	// Per request a long stall can make any TPOT plausible; a run whose
	// median time per output token exceeds maxMedianTPOT was written in
	// other units (ms timestamps pass every per-row check).
	var tpots []float64
	for _, r := range rows {
		if r.req.OutputTokens > 1 {
			tpots = append(tpots, float64(r.req.RecordedITLUS)/1e6)
		}
	}
	if len(tpots) > 0 {
		sort.Float64s(tpots)
		med := (tpots[(len(tpots)-1)/2] + tpots[len(tpots)/2]) / 2
		if med > maxMedianTPOT {
			return nil, &InputError{Path: path, Field: "last_token_ts", Msg: fmt.Sprintf("expected seconds, found a median time per output token of %.3g s over %d requests (inconsistent units: milliseconds?)", med, len(tpots))}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].queued < rows[j].queued })
	t0 := rows[0].queued
	out := make([]trace.Request, len(rows))
	for i := range rows {
		out[i] = rows[i].req
		out[i].ArrivalUS = int64(math.Round((rows[i].queued - t0) * 1e6))
	}
	return out, nil
}

// maxMedianTPOT (s) is far above any real decode (tens of ms per token).
const maxMedianTPOT = 10
