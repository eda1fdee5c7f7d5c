package measure

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LifecycleStats is one stage of an inference-perf run as its
// stage_N_lifecycle_metrics.json reports it (kubernetes-sigs/inference-perf,
// reportgen: summarize_requests). Times in s as it writes them, from the
// client: TTFT is the first streamed line's time after the request was
// sent; TPOT is a request's (last line − first line) / (lines − 1) over
// the lines of its SSE stream (two per event: the data line and the empty
// line after it, then [DONE] and its empty line), so it is about half the
// time per generated token; ITL is every gap between two lines, so its
// mean is the mean TPOT.
type LifecycleStats struct {
	Sent, Completed, Failed int
	RequestedRate           float64 // req/s
	AchievedRate            float64 // sent / send duration, req/s
	SendDuration            float64 // s
	ScheduleDelayP50        float64 // s: send time − scheduled time
	TTFT, TPOT, ITL, E2E    Quantiles
	RequestsPerSec          float64 // completed / (last end − first send) over every request of the stage
	PromptLenMean           float64 // tokens, the client's tokenizer over the prompt text (with BOS)
	OutputLenMedian         float64 // tokens, the client's re-tokenisation of the streamed text
}

// Quantiles are the statistics read from an inference-perf distribution.
type Quantiles struct{ Mean, P50, P90, P99 float64 }

type ipDist struct {
	Mean   *float64 `json:"mean"`
	Median *float64 `json:"median"`
	P90    *float64 `json:"p90"`
	P99    *float64 `json:"p99"`
}

type ipLifecycle struct {
	LoadSummary struct {
		Count         *int    `json:"count"`
		ScheduleDelay *ipDist `json:"schedule_delay"`
		SendDuration  float64 `json:"send_duration"`
		RequestedRate float64 `json:"requested_rate"`
		AchievedRate  float64 `json:"achieved_rate"`
	} `json:"load_summary"`
	Successes struct {
		Count   *int `json:"count"`
		Latency struct {
			RequestLatency   *ipDist `json:"request_latency"`
			TimePerOutputTok *ipDist `json:"time_per_output_token"`
			TimeToFirstToken *ipDist `json:"time_to_first_token"`
			InterTokenLat    *ipDist `json:"inter_token_latency"`
		} `json:"latency"`
		Throughput struct {
			RequestsPerSec float64 `json:"requests_per_sec"`
		} `json:"throughput"`
		PromptLen *ipDist `json:"prompt_len"`
		OutputLen *ipDist `json:"output_len"`
	} `json:"successes"`
	Failures struct {
		Count *int `json:"count"`
	} `json:"failures"`
}

// ReadLifecycle reads an inference-perf lifecycle metrics file (a stage's
// or the summary).
func ReadLifecycle(path string, r io.Reader) (LifecycleStats, error) {
	var m ipLifecycle
	dec := json.NewDecoder(r)
	if err := dec.Decode(&m); err != nil {
		return LifecycleStats{}, &InputError{Path: path, Msg: "expected inference-perf lifecycle metrics (JSON): " + err.Error()}
	}
	var s LifecycleStats
	need := func(field string, v *int) (int, error) {
		if v == nil {
			return 0, &InputError{Path: path, Field: field, Msg: "expected a count, found none"}
		}
		return *v, nil
	}
	var err error
	if s.Sent, err = need("load_summary.count", m.LoadSummary.Count); err != nil {
		return s, err
	}
	if s.Completed, err = need("successes.count", m.Successes.Count); err != nil {
		return s, err
	}
	if s.Failed, err = need("failures.count", m.Failures.Count); err != nil {
		return s, err
	}
	if s.Completed+s.Failed != s.Sent || s.Completed < 0 || s.Failed < 0 {
		return s, &InputError{Path: path, Field: "load_summary.count", Msg: fmt.Sprintf("expected successes + failures = %d + %d, found %d", s.Completed, s.Failed, s.Sent)}
	}
	s.RequestedRate, s.AchievedRate, s.SendDuration = m.LoadSummary.RequestedRate, m.LoadSummary.AchievedRate, m.LoadSummary.SendDuration
	s.RequestsPerSec = m.Successes.Throughput.RequestsPerSec
	q := func(field string, d *ipDist) (Quantiles, error) {
		if s.Completed == 0 {
			return Quantiles{}, nil
		}
		if d == nil || d.Mean == nil || d.Median == nil || d.P90 == nil || d.P99 == nil {
			return Quantiles{}, &InputError{Path: path, Field: field, Msg: "expected mean, median, p90 and p99, found none"}
		}
		return Quantiles{*d.Mean, *d.Median, *d.P90, *d.P99}, nil
	}
	l := &m.Successes.Latency
	if s.TTFT, err = q("successes.latency.time_to_first_token", l.TimeToFirstToken); err != nil {
		return s, err
	}
	if s.TPOT, err = q("successes.latency.time_per_output_token", l.TimePerOutputTok); err != nil {
		return s, err
	}
	if s.ITL, err = q("successes.latency.inter_token_latency", l.InterTokenLat); err != nil {
		return s, err
	}
	if s.E2E, err = q("successes.latency.request_latency", l.RequestLatency); err != nil {
		return s, err
	}
	if d := m.LoadSummary.ScheduleDelay; d != nil && d.Median != nil {
		s.ScheduleDelayP50 = *d.Median
	}
	if d := m.Successes.PromptLen; d != nil && d.Mean != nil {
		s.PromptLenMean = *d.Mean
	}
	if d := m.Successes.OutputLen; d != nil && d.Median != nil {
		s.OutputLenMedian = *d.Median
	}
	return s, nil
}

// OpenLoopStage is one stage of an open-loop benchmark run: the deployment,
// the load generator's config (data: and load: sections, as inference-perf
// ran them) and what the client measured.
type OpenLoopStage struct {
	Experiment          string
	Model, GPU          string
	TP                  int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	MaxModelLen         int
	Engine, Version     string // "vllm", "" when the run does not say
	Config              string // the run's data: and load: sections, JSON
	Stage               int
	LifecycleStats
}

// OpenLoopColumns is the header of the open-loop stage table.
var OpenLoopColumns = []string{"experiment", "model", "gpu", "tp", "engine", "engine_version", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
	"config", "stage", "requested_rate", "sent", "completed", "failed", "achieved_rate", "send_duration_s", "schedule_delay_p50_ms",
	"prompt_len_mean", "output_len_median",
	"ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms",
	"itl_mean_ms", "e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "requests_per_s"}

// WriteOpenLoopStages writes stages as a CSV under comment lines (# …)
// naming their source.
func WriteOpenLoopStages(w io.Writer, comments []string, stages []OpenLoopStage) error {
	for _, c := range comments {
		if _, err := fmt.Fprintf(w, "# %s\n", c); err != nil {
			return err
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(OpenLoopColumns); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }
	ms := func(v float64) string { return f(v * 1e3) }
	for _, s := range stages {
		rec := []string{s.Experiment, s.Model, s.GPU, strconv.Itoa(s.TP), s.Engine, s.Version, strconv.Itoa(s.MaxNumSeqs), strconv.Itoa(s.MaxNumBatchedTokens), strconv.Itoa(s.MaxModelLen),
			s.Config, strconv.Itoa(s.Stage), f(s.RequestedRate), strconv.Itoa(s.Sent), strconv.Itoa(s.Completed), strconv.Itoa(s.Failed), f(s.AchievedRate), f(s.SendDuration), ms(s.ScheduleDelayP50),
			f(s.PromptLenMean), f(s.OutputLenMedian),
			ms(s.TTFT.Mean), ms(s.TTFT.P50), ms(s.TTFT.P90), ms(s.TTFT.P99), ms(s.TPOT.Mean), ms(s.TPOT.P50), ms(s.TPOT.P90), ms(s.TPOT.P99),
			ms(s.ITL.Mean), f(s.E2E.Mean), f(s.E2E.P50), f(s.E2E.P90), f(s.E2E.P99), f(s.RequestsPerSec)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadOpenLoopStages reads the open-loop stage table (WriteOpenLoopStages;
// lines starting with # are comments).
func ReadOpenLoopStages(path string, r io.Reader) ([]OpenLoopStage, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, &InputError{Path: path, Msg: err.Error()}
	}
	// Comments are blanked, not removed, so line numbers stay the file's
	// (the CSV reader skips empty lines).
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#") {
			lines[i] = ""
		}
	}
	t, err := newCSVTable(path, strings.NewReader(strings.Join(lines, "\n")), OpenLoopColumns...)
	if err != nil {
		return nil, err
	}
	var out []OpenLoopStage
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		var s OpenLoopStage
		s.Experiment, s.Model, s.GPU, s.Engine, s.Version, s.Config = t.str("experiment"), t.str("model"), t.str("gpu"), t.str("engine"), t.str("engine_version"), t.str("config")
		for _, x := range []struct {
			name string
			v    *int
			pos  bool
		}{{"tp", &s.TP, true}, {"max_num_seqs", &s.MaxNumSeqs, true}, {"max_num_batched_tokens", &s.MaxNumBatchedTokens, true}, {"max_model_len", &s.MaxModelLen, true},
			{"stage", &s.Stage, false}, {"sent", &s.Sent, true}, {"completed", &s.Completed, false}, {"failed", &s.Failed, false}} {
			if *x.v, err = t.count(x.name, x.pos); err != nil {
				return nil, err
			}
		}
		for _, x := range []struct {
			name  string
			v     *float64
			scale float64
		}{{"requested_rate", &s.RequestedRate, 1}, {"achieved_rate", &s.AchievedRate, 1}, {"send_duration_s", &s.SendDuration, 1}, {"schedule_delay_p50_ms", nil, 1e-3},
			{"prompt_len_mean", &s.PromptLenMean, 1}, {"output_len_median", &s.OutputLenMedian, 1},
			{"ttft_mean_ms", &s.TTFT.Mean, 1e-3}, {"ttft_p50_ms", &s.TTFT.P50, 1e-3}, {"ttft_p90_ms", &s.TTFT.P90, 1e-3}, {"ttft_p99_ms", &s.TTFT.P99, 1e-3},
			{"tpot_mean_ms", &s.TPOT.Mean, 1e-3}, {"tpot_p50_ms", &s.TPOT.P50, 1e-3}, {"tpot_p90_ms", &s.TPOT.P90, 1e-3}, {"tpot_p99_ms", &s.TPOT.P99, 1e-3},
			{"itl_mean_ms", &s.ITL.Mean, 1e-3}, {"e2e_mean_s", &s.E2E.Mean, 1}, {"e2e_p50_s", &s.E2E.P50, 1}, {"e2e_p90_s", &s.E2E.P90, 1}, {"e2e_p99_s", &s.E2E.P99, 1},
			{"requests_per_s", &s.RequestsPerSec, 1}} {
			if x.name == "schedule_delay_p50_ms" {
				// A send may come slightly before its schedule: negative is fine.
				v, perr := strconv.ParseFloat(t.str(x.name), 64)
				if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, t.errf(x.name, "expected a finite number, found %q", t.str(x.name))
				}
				s.ScheduleDelayP50 = v * x.scale
				continue
			}
			v, err := t.float(x.name, false)
			if err != nil {
				return nil, err
			}
			*x.v = v * x.scale
		}
		if s.Completed+s.Failed != s.Sent {
			return nil, t.errf("sent", "expected completed + failed = %d + %d, found %d", s.Completed, s.Failed, s.Sent)
		}
		if !json.Valid([]byte(s.Config)) {
			return nil, t.errf("config", "expected the run's data: and load: sections as JSON")
		}
		if s.Experiment == "" || s.Model == "" || s.GPU == "" {
			return nil, t.errf("experiment", "expected experiment, model and gpu, found an empty field")
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, &InputError{Path: path, Line: t.line, Msg: "expected at least one stage row, found none"}
	}
	return out, nil
}

// ReadOpenLoopRun reads one inference-perf run directory: its launch
// settings (exp-config.yaml: model, tensor_parallelism, max_model_len,
// max_num_batched_tokens, max_num_seqs), the config inference-perf ran
// (results/config.yaml, as it resolved it) and each stage's lifecycle
// metrics (results/stage_N_lifecycle_metrics.json). gpu names the GPU (the
// files do not).
func ReadOpenLoopRun(dir, gpu string) ([]OpenLoopStage, error) {
	var exp struct {
		Model                  string `yaml:"model"`
		TensorParallelism      int    `yaml:"tensor_parallelism"`
		MaxModelLen            int    `yaml:"max_model_len"`
		MaxNumBatchedTokens    int    `yaml:"max_num_batched_tokens"`
		MaxNumSeqs             int    `yaml:"max_num_seqs"`
		App                    string `yaml:"app"`
		VLLMVersion            string `yaml:"vllm_version"`
		GPUMemoryUtilization   any    `yaml:"gpu_memory_utilization"`
		EnablePrefixCaching    any    `yaml:"enable_prefix_caching"`
		AsyncScheduling        any    `yaml:"async_scheduling"`
		KVCacheDtype           any    `yaml:"kv_cache_dtype"`
		EnableChunkedPrefill   any    `yaml:"enable_chunked_prefill"`
		Dtype                  any    `yaml:"dtype"`
		Quantization           any    `yaml:"quantization"`
		MaxNumPartialPrefills  any    `yaml:"max_num_partial_prefills"`
		LongPrefillTokenThresh any    `yaml:"long_prefill_token_threshold"`
	}
	ep := filepath.Join(dir, "exp-config.yaml")
	b, err := os.ReadFile(ep)
	if err != nil {
		return nil, &InputError{Path: ep, Msg: err.Error()}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&exp); err != nil {
		return nil, &InputError{Path: ep, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for _, k := range []struct {
		name string
		v    any
	}{{"gpu_memory_utilization", exp.GPUMemoryUtilization}, {"enable_prefix_caching", exp.EnablePrefixCaching}, {"async_scheduling", exp.AsyncScheduling},
		{"kv_cache_dtype", exp.KVCacheDtype}, {"enable_chunked_prefill", exp.EnableChunkedPrefill}, {"dtype", exp.Dtype}, {"quantization", exp.Quantization},
		{"max_num_partial_prefills", exp.MaxNumPartialPrefills}, {"long_prefill_token_threshold", exp.LongPrefillTokenThresh}} {
		if k.v != nil {
			return nil, &InputError{Path: ep, Field: k.name, Msg: "not read by this reader: give the setting to blis-calibrate or blis-sim with its flag or the cluster YAML"}
		}
	}
	if exp.Model == "" || exp.TensorParallelism <= 0 || exp.MaxNumSeqs <= 0 || exp.MaxNumBatchedTokens <= 0 || exp.MaxModelLen <= 0 {
		return nil, &InputError{Path: ep, Msg: "expected model, tensor_parallelism, max_model_len, max_num_batched_tokens and max_num_seqs, all positive"}
	}
	cp := filepath.Join(dir, "results", "config.yaml")
	cb, err := os.ReadFile(cp)
	if err != nil {
		return nil, &InputError{Path: cp, Msg: err.Error()}
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(cb, &cfg); err != nil {
		return nil, &InputError{Path: cp, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	sections := map[string]any{}
	for _, k := range []string{"api", "data", "load"} {
		if v, ok := cfg[k]; ok {
			sections[k] = v
		}
	}
	if s, ok := cfg["server"].(map[string]any); ok {
		if v, ok := s["ignore_eos"]; ok {
			sections["server"] = map[string]any{"ignore_eos": v}
		}
	}
	js, err := json.Marshal(sections)
	if err != nil {
		return nil, &InputError{Path: cp, Msg: err.Error()}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "results", "stage_*_lifecycle_metrics.json"))
	type nf struct {
		n int
		p string
	}
	var stages []nf
	for _, p := range files {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(p), "stage_%d_lifecycle_metrics.json", &n); err == nil {
			stages = append(stages, nf{n, p})
		}
	}
	if len(stages) == 0 {
		return nil, &InputError{Path: filepath.Join(dir, "results"), Msg: "expected stage_N_lifecycle_metrics.json files, found none (inference-perf writes them with report.request_lifecycle.per_stage)"}
	}
	sort.Slice(stages, func(i, j int) bool { return stages[i].n < stages[j].n })
	var out []OpenLoopStage
	for _, s := range stages {
		f, err := os.Open(s.p)
		if err != nil {
			return nil, &InputError{Path: s.p, Msg: err.Error()}
		}
		st, err := ReadLifecycle(s.p, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, OpenLoopStage{Experiment: filepath.Base(dir), Model: exp.Model, GPU: gpu, TP: exp.TensorParallelism,
			MaxNumSeqs: exp.MaxNumSeqs, MaxNumBatchedTokens: exp.MaxNumBatchedTokens, MaxModelLen: exp.MaxModelLen,
			Engine: "vllm", Version: exp.VLLMVersion, Config: string(js), Stage: s.n, LifecycleStats: st})
	}
	return out, nil
}

// ReadOpenLoop reads open-loop stages from path: the stage table (a CSV
// file, ReadOpenLoopStages), one inference-perf run directory (with
// exp-config.yaml; ReadOpenLoopRun), or a directory of run directories
// (DIR/*/exp-config.yaml, as inference-sim/training's default_args/). gpu
// names the GPU of run directories, which do not record it.
func ReadOpenLoop(path, gpu string) ([]OpenLoopStage, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &InputError{Path: path, Msg: err.Error()}
	}
	if !fi.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return nil, &InputError{Path: path, Msg: err.Error()}
		}
		defer f.Close()
		return ReadOpenLoopStages(path, f)
	}
	if gpu == "" {
		return nil, &InputError{Path: path, Msg: "an inference-perf run does not record its GPU: pass --gpu"}
	}
	if _, err := os.Stat(filepath.Join(path, "exp-config.yaml")); err == nil {
		return ReadOpenLoopRun(path, gpu)
	}
	runs, _ := filepath.Glob(filepath.Join(path, "*", "exp-config.yaml"))
	if len(runs) == 0 {
		runs, _ = filepath.Glob(filepath.Join(path, "default_args", "*", "exp-config.yaml"))
	}
	if len(runs) == 0 {
		return nil, &InputError{Path: path, Msg: "expected an inference-perf run (exp-config.yaml and results/stage_N_lifecycle_metrics.json) or a directory of runs, found neither"}
	}
	sort.Strings(runs)
	var out []OpenLoopStage
	for _, r := range runs {
		st, err := ReadOpenLoopRun(filepath.Dir(r), gpu)
		if err != nil {
			return nil, err
		}
		out = append(out, st...)
	}
	return out, nil
}
