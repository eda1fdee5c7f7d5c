package measure

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReadServingPointsReal(t *testing.T) {
	pts, st, err := ReadServingPoints("s.csv", open(t, "silicon_h100_qwen3_32b.csv"), ServingFilter{Model: "qwen3-32b", GPU: "h100", Engine: "vllm", TP: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 30 || st.Rows != 95 || st.Kept != 30 {
		t.Fatalf("kept %d of %d rows (stats %+v), want 30 of 95", len(pts), st.Rows, st)
	}
	p := pts[0]
	if p.InputTokens != 1024 || p.OutputTokens != 128 || p.Concurrency != 8 || p.TP != 4 {
		t.Errorf("first point %+v", p)
	}
	if p.TTFTus < 126000 || p.TTFTus > 126200 || p.TPOTus < 11700 || p.TPOTus > 11800 {
		t.Errorf("units: ttft %g µs tpot %g µs", p.TTFTus, p.TPOTus)
	}
	if err := SingleGroup("s.csv", pts, st); err != nil {
		t.Error(err)
	}
	all, st2, err := ReadServingPoints("s.csv", open(t, "silicon_h100_qwen3_32b.csv"), ServingFilter{Model: "Qwen/Qwen3-32B"})
	if err != nil {
		t.Fatal(err)
	}
	err = SingleGroup("s.csv", all, st2)
	if err == nil || !strings.Contains(err.Error(), "tp2") || !strings.Contains(err.Error(), "--tp") {
		t.Errorf("several groups: got %v", err)
	}
}

const servingHeader = "id,model_path,system,backend,backend_version,precision,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"

// A measurement published twice (same deployment, lengths, concurrency and
// values) is kept once and counted; a repeated measurement with its own
// values is a second measurement and stays.
func TestReadServingPointsDuplicates(t *testing.T) {
	body := servingHeader +
		"a,m,h100_sxm,vllm,1,,agg,1024,128,8,2,150.5,20.25\n" +
		"b,m,h100_sxm,vllm,1,,agg,1024,128,8,2,150.5,20.25\n" + // the same row under another id
		"c,m,h100_sxm,vllm,1,,agg,1024,128,8,2,151.0,20.25\n" + // measured again
		"d,m,h100_sxm,vllm,1,,agg,1024,128,8,4,150.5,20.25\n" + // another deployment (TP 4)
		"e,m,h100_sxm,vllm,1,,agg,1024,128,8,2,150.5,20.25\n"
	pts, st, err := ReadServingPoints("s.csv", strings.NewReader(body), ServingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pts {
		ids = append(ids, p.ID)
	}
	if got := strings.Join(ids, ","); got != "a,c,d" || st.Duplicates != 2 || st.Kept != 3 || st.Rows != 5 {
		t.Errorf("kept %s (stats %+v), want a,c,d with 2 duplicates of 5 rows", got, st)
	}
}

func TestReadServingPointsBad(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"missing column", "model_path,system\nx,y\n", "field backend: expected a column"},
		{"empty ttft", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,,5\n", "s.csv:2: field silicon_ttft_ms: expected a number, found an empty field"},
		{"negative tpot", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,5,-3\n", "s.csv:2: field silicon_tpot_ms: expected a positive value, found -3"},
		{"zero ttft", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,0,3\n", "field silicon_ttft_ms: expected a positive value"},
		{"fractional isl", "a,m,h100_sxm,vllm,1,,agg,10.5,10,1,1,5,3\n", "field isl: expected an integer, found \"10.5\""},
		{"units", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,5,300000\n", "inconsistent units"},
		{"one tpot in µs", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,500,30000\n", "s.csv:2: field silicon_tpot_ms: expected milliseconds (TPOT 0.1 ms to 10 s), found ttft 500 and tpot 30000 (inconsistent units?)"},
		{"times in s", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,0.5,0.03\n", "s.csv:2: field silicon_tpot_ms: expected milliseconds (TPOT 0.1 ms to 10 s), found ttft 0.5 and tpot 0.03 (inconsistent units?)"},
		{"third row", "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,5,3\na,m,h100_sxm,vllm,1,,agg,10,10,1,1,5,3\na,m,h100_sxm,vllm,1,,agg,10,10,x,1,5,3\n", "s.csv:4: field batch_size"},
		{"empty", "", "expected a CSV header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if !strings.HasPrefix(body, "model_path") && body != "" {
				body = servingHeader + body
			}
			_, _, err := ReadServingPoints("s.csv", strings.NewReader(body), ServingFilter{})
			var ie *InputError
			if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an InputError containing %q", err, tc.want)
			}
		})
	}
}

func TestReadStepTimes(t *testing.T) {
	s, st, err := ReadStepTimes("sw.csv", open(t, "splitwise_h100_tp4.csv"), StepFilter{Model: "llama2-70b", GPU: "h100", TP: 4})
	if err != nil {
		t.Fatal(err)
	}
	if st.Format != "splitwise" || st.Kept != 21 || st.Filtered != 21 || len(s) != 42 {
		t.Fatalf("stats %+v, %d samples", st, len(s))
	}
	if b := s[0].Batch; b.PrefillSeqs != 1 || b.PrefillTokens != 512 || b.PrefillAttn != 512*513/2 {
		t.Errorf("prefill batch %+v", b)
	}
	if b := s[1].Batch; b.DecodeSeqs != 1 || b.DecodeCtx != 512+64 {
		t.Errorf("decode batch %+v", b)
	}
	bad := []struct{ name, body, want string }{
		{"unknown", "a,b\n1,2\n", "unrecognised step-time header"},
		{"generic missing col", "step_us,prefill_seqs\n1,2\n", "field prefill_tokens: expected this column"},
		{"generic empty step", "prefill_seqs,prefill_tokens,prefill_ctx,decode_seqs,decode_ctx,step_us\n0,0,0,0,0,5\n", "x.csv:2: field prefill_seqs: expected a step with at least one request"},
		{"generic negative", "prefill_seqs,prefill_tokens,prefill_ctx,decode_seqs,decode_ctx,step_us\n1,10,0,0,0,-5\n", "x.csv:2: field step_us: expected a positive value"},
		{"generic step in ms", "prefill_seqs,prefill_tokens,prefill_ctx,decode_seqs,decode_ctx,step_us\n0,0,0,8,800,1.7\n", "x.csv:2: field step_us: expected microseconds (10 µs to 1 h per step), found 1.7 (inconsistent units: milliseconds?)"},
		{"generic step in ns", "prefill_seqs,prefill_tokens,prefill_ctx,decode_seqs,decode_ctx,step_us\n0,0,0,8,800,5e10\n", "x.csv:2: field step_us: expected microseconds (10 µs to 1 h per step), found 5e+10 (inconsistent units: nanoseconds?)"},
		{"splitwise time in s", "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\nm,h,10,1,10,0.2,0.005,1\n", "x.csv:2: field token_time: expected milliseconds (0.01 ms to 1 h per step), found 0.005 (inconsistent units: seconds?)"},
		{"splitwise bad time", "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,tensor_parallel\nm,h,10,1,10,,3,1\n", "x.csv:2: field prompt_time"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadStepTimes("x.csv", strings.NewReader(tc.body), StepFilter{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReadRun(t *testing.T) {
	reqs, err := ReadRunRequests("testdata/llmss_rtx4090_head40.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 40 || reqs[0].ArrivalUS != 0 || reqs[0].ID != "bench-0" {
		t.Fatalf("%d requests, first %+v", len(reqs), reqs[0])
	}
	// bench-0: first_token − queued = 27537.350135653 − 27536.660701067 s.
	if d := reqs[0].RecordedTTFTUS - 689435; d < -1 || d > 1 {
		t.Errorf("ttft %d µs", reqs[0].RecordedTTFTUS)
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].ArrivalUS < reqs[i-1].ArrivalUS {
			t.Fatalf("not sorted at %d", i)
		}
	}
	cfg, err := ReadRunMeta("m.json", open(t, "llmss_rtx4090_meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxNumSeqs != 256 || cfg.MaxNumBatchedTokens != 2048 || cfg.KVBlocks != 2588 || cfg.BlockSize != 16 || cfg.TP != 1 {
		t.Errorf("meta %+v", cfg)
	}
	line := func(id string, in, out int, q, f, l float64) string {
		return fmt.Sprintf(`{"request_id":%q,"input_toks":%d,"output_toks":%d,"queued_ts":%g,"first_token_ts":%g,"last_token_ts":%g}`+"\n", id, in, out, q, f, l)
	}
	dir := t.TempDir()
	bad := []struct{ name, body, want string }{
		{"not json", "{\n", "r.jsonl:1"},
		{"missing first", `{"request_id":"a","input_toks":1,"output_toks":2,"queued_ts":1,"last_token_ts":2}` + "\n", "r.jsonl:1: request a failed in the recorded run"},
		{"reversed", line("a", 1, 2, 5, 4, 6), "r.jsonl:1: last_token_ts: expected queued_ts <= first_token_ts <= last_token_ts"},
		{"zero input", "\n" + line("a", 0, 2, 1, 2, 3), "r.jsonl:2: input_tokens: expected > 0"},
		{"dup", line("a", 1, 2, 1, 2, 3) + line("a", 1, 2, 1, 2, 3), "r.jsonl:2"},
		{"units", line("a", 1, 2, 1, 2, 3e9), "inconsistent units"},
		{"ms timestamps", line("a", 1, 101, 1000, 1500, 4500) + line("b", 1, 101, 1000, 1600, 4600),
			"r.jsonl: field last_token_ts: expected seconds, found a median time per output token of 30 s over 2 requests (inconsistent units: milliseconds?)"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "r.jsonl")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadRunRequests(p, "llmservingsim")
			var bi interface{ BadInput() bool }
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &bi) {
				t.Fatalf("got %v, want bad input containing %q", err, tc.want)
			}
		})
	}
}

// An engine setting written as 0 or negative is an error naming the field,
// not the default (tp 0 used to run as tp 1, block_size 0 as 16).
func TestReadRunMetaBad(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"tp 0", `{"model":"m","engine_kwargs":{"tensor_parallel_size":0}}`, "m.json: field engine_kwargs.tensor_parallel_size: expected a positive integer, found 0"},
		{"negative seqs", `{"model":"m","engine_kwargs":{"max_num_seqs":-4}}`, "m.json: field engine_kwargs.max_num_seqs: expected a positive integer, found -4"},
		{"block size 0", `{"model":"m","kv_cache":{"block_size":0}}`, "m.json: field kv_cache.block_size: expected a positive integer, found 0"},
		{"blocks 0", `{"model":"m","kv_cache":{"num_gpu_blocks":0}}`, "m.json: field kv_cache.num_gpu_blocks: expected a positive integer, found 0"},
		{"not json", `{"model":`, "m.json: expected an llmservingsim meta.json object"},
	} {
		_, err := ReadRunMeta("m.json", strings.NewReader(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want %q", c.name, err, c.want)
		}
	}
	// Absent and null settings keep their defaults.
	cfg, err := ReadRunMeta("m.json", strings.NewReader(`{"model":"m","kv_cache":{"num_gpu_blocks":null,"block_size":16}}`))
	if err != nil || cfg.KVBlocks != 0 || cfg.BlockSize != 16 || cfg.TP != 0 {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

func TestDeviceGPU(t *testing.T) {
	for _, c := range []struct{ dev, want string }{
		{"NVIDIA GeForce RTX 4090", "rtx4090"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtxpro6000"},
		{"NVIDIA H100 80GB HBM3", "h100"},
		{"NVIDIA GB200", "gb200"}, // contains "b200"
		{"NVIDIA B200", "b200"},
		{"NVIDIA A100-SXM4-80GB", "a100-80gb"},
		{"NVIDIA A100-SXM4-40GB", ""}, // not the 80 GB card: the KV capacity would be wrong
		{"NVIDIA Quantum 9000", ""},
	} {
		if got := DeviceGPU(c.dev); got != c.want {
			t.Errorf("DeviceGPU(%q) = %q, want %q", c.dev, got, c.want)
		}
	}
}

func TestReadTimeseries(t *testing.T) {
	s, err := ReadTimeseriesFile("testdata/llmss_rtx4090_timeseries.head20.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 20 || s[0].T != 1 || s[0].Running != 5 || s[0].Waiting != 2 || s[4].KVPct != 100 || s[5].GenTput != 1522 {
		t.Fatalf("%d ticks: %v … %v", len(s), s[0], s[len(s)-1])
	}
	h := "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n"
	for _, c := range []struct{ name, body, want string }{
		{"missing column", "t,running\n1,2\n", "field waiting: expected a column"},
		{"backwards", h + "2,0,0,1,0,5\n1,0,0,1,0,5\n", "ts.csv:3: field t: expected times in increasing order, found 1 after 2"},
		{"fraction", h + "1,0,0,1.5,0,5\n", "ts.csv:2: field running: expected an integer"},
		{"kv fraction of 1", h + "1,0,0,1,0,250\n", "ts.csv:2: field kv_cache_pct: expected a percentage"},
		{"empty", h, "expected at least one tick"},
	} {
		if _, err := ReadTimeseries("ts.csv", strings.NewReader(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestReadVidurMLP(t *testing.T) {
	rows, skipped, err := ReadVidurMLPFile("testdata/vidur_h100_llama2_7b_mlp.head5.csv")
	if err != nil || skipped != 0 || len(rows) != 5 {
		t.Fatalf("%d rows, %d skipped, %v", len(rows), skipped, err)
	}
	// Σ of the nine operations' medians of the first row, ms → µs.
	if r := rows[0]; r.Tokens != 4096 || r.TP != 1 || math.Abs(r.US-2592) > 1e-6 {
		t.Errorf("first row %+v", r)
	}
	if _, _, err := ReadVidurMLP("m.csv", strings.NewReader("num_tokens\n5\n")); err == nil || !strings.Contains(err.Error(), "num_tensor_parallel_workers") {
		t.Errorf("missing column: %v", err)
	}
}
