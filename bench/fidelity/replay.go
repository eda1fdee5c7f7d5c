package main

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

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"go.yaml.in/yaml/v3"
)

// stepsTable is the derived table of the open-loop runs' decode steps
// (see deriveSteps), relative to the repository root.
const stepsTable = "bench/fidelity/testdata/inference_perf_h100_steps.csv"

// stepsCommit is the commit of inference-sim/training whose replay_data/
// the steps table is derived from (the directory was deleted later).
const stepsCommit = "c4f03409b4489891482bcd63797cfe3a92fc262d"

// replayExp is one experiment of replay_data/: the server's settings, the
// KV blocks its vLLM log reported, and every request with what the client
// measured.
type replayExp struct {
	name                   string
	tp, maxSeqs, maxTokens int
	kvBlocks, blockSize    int
	reqs                   []replayReq
	succeeded, failed      int
	// generated is the tokens every request generated (the requested
	// output_len under server.ignore_eos); 0 when the config does not fix
	// it, and each request's output_tokens (the client's re-tokenisation
	// of the text, a few tokens off and sometimes far off) stands in.
	generated int
}

// replayReq is one request: times in seconds from the first arrival.
type replayReq struct {
	arrival, first, end float64 // first: NaN for a failed request
	in, out             int
	failed              bool
}

// readReplayExp reads <exp>.json and <exp>_ground_truth.json.
func readReplayExp(path string) (*replayExp, error) {
	var spec struct {
		Experiment string `json:"experiment"`
		Config     struct {
			TP        int `json:"tensor_parallelism"`
			MaxSeqs   int `json:"max_num_seqs"`
			MaxTokens int `json:"max_num_batched_tokens"`
			KVBlocks  int `json:"kv_blocks_total_gpu"`
			BlockSize int `json:"block_size"`
		} `json:"config"`
		Requests []struct {
			Index     int   `json:"index"`
			ArrivalUS int64 `json:"arrival_time_us"`
			In        int   `json:"input_tokens"`
			Out       int   `json:"output_tokens"`
			HasError  bool  `json:"has_error"`
		} `json:"requests"`
	}
	var truth []struct {
		Index    int      `json:"index"`
		HasError bool     `json:"has_error"`
		E2E      *float64 `json:"e2e_s"`
		TTFT     *float64 `json:"ttft_s"`
	}
	var err error
	if err = readJSON(path, &spec); err != nil {
		return nil, err
	}
	gt := strings.TrimSuffix(path, ".json") + "_ground_truth.json"
	if err := readJSON(gt, &truth); err != nil {
		return nil, err
	}
	c := spec.Config
	if spec.Experiment == "" || c.TP < 1 || c.MaxSeqs < 1 || c.KVBlocks < 1 || c.BlockSize < 1 {
		return nil, fmt.Errorf("%s: expected experiment and config.tensor_parallelism, max_num_seqs, kv_blocks_total_gpu, block_size > 0", path)
	}
	byIdx := make(map[int]int, len(truth))
	for i, t := range truth {
		byIdx[t.Index] = i
	}
	e := &replayExp{name: spec.Experiment, tp: c.TP, maxSeqs: c.MaxSeqs, maxTokens: c.MaxTokens, kvBlocks: c.KVBlocks, blockSize: c.BlockSize}
	for _, r := range spec.Requests {
		i, ok := byIdx[r.Index]
		if !ok {
			return nil, fmt.Errorf("%s: request %d has no ground truth", gt, r.Index)
		}
		t := truth[i]
		q := replayReq{arrival: float64(r.ArrivalUS) / 1e6, in: r.In, out: r.Out, first: math.NaN()}
		switch {
		case t.HasError || r.HasError:
			q.failed = true
			if t.E2E == nil {
				return nil, fmt.Errorf("%s: failed request %d: expected e2e_s (when the client gave up)", gt, r.Index)
			}
			q.end = q.arrival + *t.E2E
			e.failed++
		case t.E2E == nil || t.TTFT == nil || *t.TTFT < 0 || *t.E2E < *t.TTFT:
			return nil, fmt.Errorf("%s: request %d: expected 0 ≤ ttft_s ≤ e2e_s", gt, r.Index)
		default:
			q.first, q.end = q.arrival+*t.TTFT, q.arrival+*t.E2E
			e.succeeded++
		}
		e.reqs = append(e.reqs, q)
	}
	if e.generated, err = fixedOutput(filepath.Join(filepath.Dir(filepath.Dir(path)), "default_args", spec.Experiment, "results", "config.yaml")); err != nil {
		return nil, err
	}
	return e, nil
}

// fixedOutput is the output length every request of an inference-perf
// config generated: data.shared_prefix.output_len when the server ignored
// EOS, else 0.
func fixedOutput(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var c struct {
		Data struct {
			SharedPrefix struct {
				OutputLen yaml.Node `yaml:"output_len"`
			} `yaml:"shared_prefix"`
		} `yaml:"data"`
		Server struct {
			IgnoreEOS bool `yaml:"ignore_eos"`
		} `yaml:"server"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := c.Data.SharedPrefix.OutputLen
	if !c.Server.IgnoreEOS || n.Kind != yaml.ScalarNode {
		return 0, nil
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%s: data.shared_prefix.output_len: expected a positive integer, found %q", path, n.Value)
	}
	return v, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// stepBins are the running-batch ranges the steps table groups seconds by.
var stepBins = []struct{ lo, hi int }{{1, 16}, {17, 48}, {49, 96}, {97, 120}, {121, 128}, {129, 1 << 30}}

// second is one reconstructed second of a run.
type second struct {
	batch, ctx, step, waiting, admitted float64
}

// seconds rebuilds a run second by second from its requests' windows. A
// successful request decodes from its first token to its last at its own
// mean rate, (out − 1)/(end − first), holding prompt + tokens so far of
// KV. In each second: batch = the decoding requests (time-weighted),
// step = batch / tokens generated, context = their mean KV length,
// waiting = requests arrived without a first token (failed ones until the
// client gave up), admitted = first tokens. A second in which a request
// that later failed was alive while the successes filled fewer than
// max_num_seqs slots is dropped: the failed one may have been decoding
// (the data do not say), so the batch is unknown.
func (e *replayExp) seconds() []second {
	end := 0.0
	for _, q := range e.reqs {
		end = max(end, q.end)
	}
	n := int(end) + 1
	b, tok, ctx, wait, failed, adm := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	spread := func(lo, hi float64, f func(k int, from, to float64)) {
		for k := int(lo); k < n && float64(k) < hi; k++ {
			from, to := max(lo, float64(k)), min(hi, float64(k+1))
			if to > from {
				f(k, from, to)
			}
		}
	}
	for _, q := range e.reqs {
		if q.failed {
			spread(q.arrival, q.end, func(k int, from, to float64) { wait[k] += to - from; failed[k] += to - from })
			continue
		}
		spread(q.arrival, q.first, func(k int, from, to float64) { wait[k] += to - from })
		adm[min(int(q.first), n-1)]++
		out := q.out
		if e.generated > 0 {
			out = e.generated
		}
		if out < 2 || q.end <= q.first {
			continue
		}
		rate := float64(out-1) / (q.end - q.first)
		spread(q.first, q.end, func(k int, from, to float64) {
			b[k] += to - from
			tok[k] += rate * (to - from)
			ctx[k] += (to - from) * (float64(q.in) + 1 + rate*((from+to)/2-q.first))
		})
	}
	out := make([]second, n)
	for k := range out {
		out[k] = second{batch: b[k], waiting: wait[k], admitted: adm[k], step: math.NaN(), ctx: math.NaN()}
		if b[k] >= 1 && tok[k] > 0 && !(failed[k] > 0 && b[k] < float64(e.maxSeqs)-0.5) {
			out[k].step, out[k].ctx = b[k]/tok[k], ctx[k]/b[k]
		}
	}
	return out
}

// stepRow is one row of the steps table: an experiment's seconds in one
// minute of the run and one batch range.
type stepRow struct {
	exp                   string
	tp, maxSeqs, kvBlocks int
	blockSize             int
	minute, lo, hi        int
	seconds               int
	batch, ctx            float64 // means over the seconds
	stepMS                float64 // median
	waiting, admitted     float64 // means: requests, first tokens per second
}

// stepRows groups a run's seconds by minute and batch range (at least
// five seconds a group).
func (e *replayExp) stepRows() []stepRow {
	secs := e.seconds()
	type key struct{ m, bin int }
	groups := map[key][]second{}
	var keys []key
	for k, s := range secs {
		if math.IsNaN(s.step) {
			continue
		}
		bi := -1
		for i, d := range stepBins {
			if r := int(math.Round(s.batch)); r >= d.lo && r <= d.hi {
				bi = i
			}
		}
		kk := key{k / 60, bi}
		if _, ok := groups[kk]; !ok {
			keys = append(keys, kk)
		}
		groups[kk] = append(groups[kk], s)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].m != keys[j].m {
			return keys[i].m < keys[j].m
		}
		return keys[i].bin < keys[j].bin
	})
	var rows []stepRow
	for _, k := range keys {
		v := groups[k]
		if len(v) < 5 {
			continue
		}
		r := stepRow{exp: e.name, tp: e.tp, maxSeqs: e.maxSeqs, kvBlocks: e.kvBlocks, blockSize: e.blockSize,
			minute: k.m, lo: stepBins[k.bin].lo, hi: stepBins[k.bin].hi, seconds: len(v)}
		steps := make([]float64, len(v))
		for i, s := range v {
			r.batch += s.batch / float64(len(v))
			r.ctx += s.ctx / float64(len(v))
			r.waiting += s.waiting / float64(len(v))
			r.admitted += s.admitted / float64(len(v))
			steps[i] = s.step * 1e3
		}
		r.stepMS = median(steps)
		rows = append(rows, r)
	}
	return rows
}

var stepsHeader = []string{"experiment", "tp", "max_num_seqs", "kv_blocks", "block_size", "minute", "batch_lo", "batch_hi",
	"seconds", "batch", "context", "step_ms", "waiting", "admitted_per_s"}

// deriveSteps reads replay_data/ of a checkout of inference-sim/training
// at stepsCommit and writes the steps table. The repository carries no
// license: the table holds figures derived from it and none of its text.
func deriveSteps(dir, commit string, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "replay_data", "*.json"))
	if err != nil {
		return err
	}
	var exps []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_ground_truth.json") {
			exps = append(exps, f)
		}
	}
	if len(exps) == 0 {
		return fmt.Errorf("%s: expected replay_data/<experiment>.json (a checkout of inference-sim/training at %.8s)", dir, stepsCommit)
	}
	sort.Strings(exps)
	for _, l := range []string{
		"Decode steps of the open-loop vLLM runs on H100 SXM, reconstructed from every request: figures derived from",
		"inference-sim/training (https://github.com/inference-sim/training) at commit " + commit + ",",
		"replay_data/<experiment>.json (config.kv_blocks_total_gpu: the KV blocks the server's log reported; each request's",
		"arrival, prompt and output tokens) and replay_data/<experiment>_ground_truth.json (each request's TTFT and E2E",
		"as the client measured them). The repository carries no license: only numbers are kept.",
		"The runs set server.ignore_eos, so every request generated its config's output_len (default_args/<experiment>/",
		"results/config.yaml); replay_data's output_tokens is the client's re-tokenisation of the text (a few tokens off,",
		"and under 100 for up to 17% of a run's requests) and is not used.",
		"Each successful request decodes from its first token to its last at its own mean rate; per second of the run",
		"batch = decoding requests (time-weighted), step = batch / tokens generated, context = their mean prompt + tokens",
		"so far, waiting = requests arrived without a first token, admitted = first tokens. Seconds in which a request",
		"that later failed was alive while the successes held fewer than max_num_seqs slots are dropped (it may have",
		"been decoding). Rows: one experiment's seconds in one minute of the run and one batch range, five or more;",
		"batch, context, waiting, admitted_per_s are means over them, step_ms the median.",
		"Regenerate: go run ./bench/fidelity -derive-steps DIR -source-commit SHA > " + stepsTable,
	} {
		if _, err := fmt.Fprintln(w, "# "+l); err != nil {
			return err
		}
	}
	cw := csv.NewWriter(w)
	cw.Write(stepsHeader)
	for _, f := range exps {
		e, err := readReplayExp(f)
		if err != nil {
			return err
		}
		for _, r := range e.stepRows() {
			cw.Write([]string{r.exp, strconv.Itoa(r.tp), strconv.Itoa(r.maxSeqs), strconv.Itoa(r.kvBlocks), strconv.Itoa(r.blockSize),
				strconv.Itoa(r.minute), strconv.Itoa(r.lo), strconv.Itoa(r.hi), strconv.Itoa(r.seconds),
				ff(r.batch, 1), ff(r.ctx, 0), ff(r.stepMS, 2), ff(r.waiting, 1), ff(r.admitted, 2)})
		}
	}
	cw.Flush()
	return cw.Error()
}

func ff(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// readSteps reads the steps table.
func readSteps(path string) ([]stepRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSteps(path, f)
}

// parseSteps parses a steps table from r; path and the file's line name
// a bad row in errors (the header's comment lines count).
func parseSteps(path string, r io.Reader) ([]stepRow, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	head, err := cr.Read()
	if err == nil && strings.Join(head, ",") != strings.Join(stepsHeader, ",") {
		line, _ := cr.FieldPos(0)
		err = fmt.Errorf("line %d: expected the header %s", line, strings.Join(stepsHeader, ","))
	}
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("expected the header %s and rows", strings.Join(stepsHeader, ","))
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []stepRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		var perr error
		num := func(col int) float64 {
			v, err := strconv.ParseFloat(rec[col], 64)
			if err != nil && perr == nil {
				perr = fmt.Errorf("%s: line %d: field %s: expected a number, found %q", path, line, stepsHeader[col], rec[col])
			}
			return v
		}
		r := stepRow{exp: rec[0], tp: int(num(1)), maxSeqs: int(num(2)), kvBlocks: int(num(3)), blockSize: int(num(4)),
			minute: int(num(5)), lo: int(num(6)), hi: int(num(7)), seconds: int(num(8)),
			batch: num(9), ctx: num(10), stepMS: num(11), waiting: num(12), admitted: num(13)}
		if perr != nil {
			return nil, perr
		}
		if !(r.batch >= 1) || !(r.stepMS > 0) || !(r.ctx >= 0) || r.kvBlocks < 1 || r.seconds < 1 || r.tp < 1 || r.maxSeqs < 1 {
			return nil, fmt.Errorf("%s: line %d: expected batch ≥ 1, step_ms > 0, context ≥ 0 and tp, max_num_seqs, kv_blocks, seconds ≥ 1", path, line)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: expected rows after the header", path)
	}
	return out, nil
}

// ctxClasses are the context ranges the step comparison groups rows by.
var ctxClasses = []struct {
	lo, hi float64
	label  string
}{{0, 1000, "< 1,000"}, {1000, 2000, "1,000–1,999"}, {2000, math.Inf(1), "≥ 2,000"}}

// stepModel is the latency model a run's steps are judged with: its
// roofline with the run's scheduler (async: host time overlapped).
func stepModel(r *fit.OpenLoopRun) (latency.Model, error) {
	res, err := resolveFor("roofline", r.Setup.Dep)
	if err != nil {
		return nil, err
	}
	return latency.WithHost(res.Model, r.Setup.Engine.Engine.AsyncScheduling), nil
}

// simStepMS is the model's pure-decode step for a row's mean batch and
// context, ms.
func simStepMS(m latency.Model, batch, ctx float64) float64 {
	n := int(math.Round(batch))
	b := latency.Batch{DecodeSeqs: n, DecodeCtx: int64(ctx * float64(n))}
	return float64(m.StepTime(&b)) / 1e3
}

// writeReplaySteps judges the roofline's decode step on the open-loop
// runs' reconstructed seconds (the steps table): KV capacity per
// deployment, the step by batch and context per model, and the saturated
// runs' step minute by minute.
func writeReplaySteps(w io.Writer, rows []stepRow, runs []*fit.OpenLoopRun) error {
	byName := map[string]*fit.OpenLoopRun{}
	for _, r := range runs {
		byName[r.Name] = r
	}
	models := map[*fit.OpenLoopRun]latency.Model{}
	var order []*fit.OpenLoopRun // runs in the table's order
	for _, row := range rows {
		r := byName[row.exp]
		if r == nil {
			return fmt.Errorf("steps table: experiment %s is not in the open-loop table", row.exp)
		}
		if _, ok := models[r]; ok {
			continue
		}
		m, err := stepModel(r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Name, err)
		}
		models[r] = m
		order = append(order, r)
	}

	fmt.Fprintln(w, "#### Open-loop runs: KV capacity (blocks of 16 tokens; real = the vLLM log's figure, inference-sim/training replay_data)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| deployment | real | simulated | error | real KV per GPU | simulated |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	seen := map[string]bool{}
	for _, r := range order {
		dep := fmt.Sprintf("%s H100 TP%d", modelOf(r), r.Setup.Dep.TP)
		if seen[dep] {
			continue
		}
		seen[dep] = true
		var real int
		for _, row := range rows {
			if row.exp == r.Name {
				real = row.kvBlocks
				break
			}
		}
		sim := r.Setup.Engine.Engine.KVBlocks
		perBlock := r.Setup.Resolved.Roofline.KVBytesPerToken() * float64(r.Setup.Engine.Engine.BlockSize) / (1 << 30)
		fmt.Fprintf(w, "| %s | %d | %d | %+.1f%% | %.2f GiB | %.2f GiB |\n", dep, real, sim, 100*(float64(sim)/float64(real)-1),
			float64(real)*perBlock, float64(sim)*perBlock)
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "#### Open-loop runs: decode step by batch and context (every request's window; roofline)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Real step: per second of the run, decoding requests / tokens they generated, from each request's first and last token ("+stepsTable+"); the first minute, with the uncached prompts, left out. Simulated: the roofline's pure-decode step at the same mean batch and context. Means over the seconds of each model, batch and context range.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| model | batch | context | seconds | mean batch | mean context | real step | roofline step |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|")
	for _, c := range compareSteps(rows, order, models) {
		label := fmt.Sprintf("%d–%d", c.lo, c.hi)
		if c.hi > 1<<20 {
			label = fmt.Sprintf("%d+", c.lo)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.1f | %.0f | %.1f ms | %.1f ms (%+.0f%%) |\n", c.model, label, c.ctxLabel, c.seconds, c.batch, c.ctx, c.real, c.sim, 100*(c.sim/c.real-1))
	}
	fmt.Fprintln(w)

	mins := []int{1, 2, 3, 4, 6, 8, 10, 15, 20}
	fmt.Fprintln(w, "#### Open-loop runs: the saturated step minute by minute (batch 121–128; real step, and the roofline's for the same batch and context)")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| run | context | roofline |")
	for _, m := range mins {
		fmt.Fprintf(w, " min %d |", m)
	}
	fmt.Fprintln(w, " waiting at min 1 / last |")
	fmt.Fprint(w, "|---|---:|---:|")
	for range mins {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|")
	for _, r := range order {
		var sat []stepRow
		for _, row := range rows {
			if row.exp == r.Name && row.lo == 121 && row.minute >= 1 && row.seconds >= 30 {
				sat = append(sat, row)
			}
		}
		if len(sat) < 5 {
			continue
		}
		var ctx, sim float64
		for _, row := range sat {
			ctx += row.ctx / float64(len(sat))
			sim += simStepMS(models[r], row.batch, row.ctx) / float64(len(sat))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f ms |", fit.ShortName(r.Name), ctx, sim)
		for _, m := range mins {
			cell := " – |"
			for _, row := range sat {
				if row.minute == m {
					cell = fmt.Sprintf(" %.1f ms (%+.0f%%) |", row.stepMS, 100*(simStepMS(models[r], row.batch, row.ctx)/row.stepMS-1))
				}
			}
			fmt.Fprint(w, cell)
		}
		fmt.Fprintf(w, " %.0f / %.0f |\n", sat[0].waiting, sat[len(sat)-1].waiting)
	}
	fmt.Fprintln(w)
	return nil
}

// stepCmp is the real and simulated decode step of one model in one batch
// and context range (minute ≥ 1): means over the seconds, ms.
type stepCmp struct {
	model, ctxLabel     string
	lo, hi              int
	seconds, batch, ctx float64
	real, sim           float64
}

// compareSteps groups the table's rows (minute ≥ 1: the first minute has
// the uncached prompts) by model, batch range and context range, in the
// runs' order.
func compareSteps(rows []stepRow, order []*fit.OpenLoopRun, models map[*fit.OpenLoopRun]latency.Model) []stepCmp {
	var mnames []string
	byModel := map[string][]*fit.OpenLoopRun{}
	for _, r := range order {
		if _, ok := byModel[modelOf(r)]; !ok {
			mnames = append(mnames, modelOf(r))
		}
		byModel[modelOf(r)] = append(byModel[modelOf(r)], r)
	}
	var out []stepCmp
	for _, mn := range mnames {
		for _, d := range stepBins {
			for _, c := range ctxClasses {
				x := stepCmp{model: mn, ctxLabel: c.label, lo: d.lo, hi: d.hi}
				for _, r := range byModel[mn] {
					for _, row := range rows {
						if row.exp != r.Name || row.minute < 1 || row.lo != d.lo || row.ctx < c.lo || row.ctx >= c.hi {
							continue
						}
						s := float64(row.seconds)
						x.seconds += s
						x.batch += s * row.batch
						x.ctx += s * row.ctx
						x.real += s * row.stepMS
						x.sim += s * simStepMS(models[r], row.batch, row.ctx)
					}
				}
				if x.seconds == 0 {
					continue
				}
				x.batch, x.ctx, x.real, x.sim = x.batch/x.seconds, x.ctx/x.seconds, x.real/x.seconds, x.sim/x.seconds
				out = append(out, x)
			}
		}
	}
	return out
}

// stepsSection writes writeReplaySteps for the open-loop table's runs.
func stepsSection(w io.Writer, openLoop, steps string) error {
	rows, err := readSteps(steps)
	if err != nil {
		return err
	}
	runs, err := loadOpenLoop(openLoop, fit.Deployment{AsyncScheduling: openLoopAsync})
	if err != nil {
		return err
	}
	return writeReplaySteps(w, rows, runs)
}
