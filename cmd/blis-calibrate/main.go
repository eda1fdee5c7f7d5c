// Command blis-calibrate fits the fitted latency model's coefficients to real
// measurements and writes a coefficients/*.yaml file, or (--evaluate) judges
// an existing latency model on them. Fitting is lib/fit, the readers of
// measurements lib/measure; this command wires them to the flags.
package main

import (
	"os"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/fit"
	_ "github.com/blis-sim/blis/lib/trace/parquetio" // --requests and the other tables may be Parquet
	"github.com/urfave/cli/v2"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:  "blis-calibrate",
		Usage: "fit latency-model coefficients to real measurements, or evaluate a latency model on them",
		UsageText: "blis-calibrate --serving-points silicon_sample.csv --model M --gpu G --tp N [--holdout 0.2] [-o FILE]\n" +
			"   blis-calibrate --open-loop RUN_DIR --gpu h100 [--fit-alpha a0,a1,a2] [--test OTHER_RUN_DIR]\n" +
			"   blis-calibrate --step-times perf_model.csv --model M --gpu G --tp N [--kfold 5]\n" +
			"   blis-calibrate --requests requests.jsonl --engine-config meta.json [--test other.jsonl --test-engine-config meta2.json]\n" +
			"   blis-calibrate --evaluate --latency roofline|fitted|auto --serving-points silicon_sample.csv --gpu h100 --engine vllm",
		Description:     "Writes the coefficients YAML to stdout or -o, the fit report to stderr or --report. See docs/calibrate.md.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "step-times", Usage: "step-level timings `FILE` (Splitwise perf_model.csv or a step CSV)"},
			&cli.StringFlag{Name: "requests", Usage: "replayed real run `FILE` (llmservingsim requests.jsonl or a requests table with recorded_*)"},
			&cli.StringFlag{Name: "serving-points", Usage: "closed-loop serving points `FILE` (aiconfigurator silicon_sample.csv)"},
			&cli.StringFlag{Name: "open-loop", Usage: "open-loop benchmark stages: an inference-perf run `DIR` (exp-config.yaml, results/), a directory of such runs, or the stage table CSV (lib/measure/testdata/inference_perf_h100.csv)"},
			&cli.StringFlag{Name: "fit-alpha", Value: "a0", Usage: "α terms fitted with the coefficients: a comma list of a0 (µs per request before queueing), a1 (µs per prompt token), a2 (µs per streamed token), or none"},
			&cli.BoolFlag{Name: "hold-terms", Usage: "keep the step model at its roofline warm start and fit the --fit-alpha terms only (the API server's time on top of the roofline)"},
			&cli.StringFlag{Name: "async-scheduling", Usage: "the engine's async scheduling, on or off (default: the engine version's; a recorded run's own)"},
			&cli.StringFlag{Name: "engine-config", Usage: "engine config of the --requests run (llmservingsim meta.json)"},
			&cli.StringFlag{Name: "test", Usage: "explicit test data `FILE`, same kind as the input"},
			&cli.StringFlag{Name: "test-engine-config", Usage: "meta.json of the --test run"},
			&cli.StringFlag{Name: "test-model", Usage: "model of the --test run (default: from its meta.json)"},
			&cli.StringFlag{Name: "test-gpu", Usage: "GPU of the --test run (default: from its meta.json)"},
			&cli.IntFlag{Name: "test-tp", Usage: "TP of the --test run (default: from its meta.json)"},
			&cli.StringFlag{Name: "model", Usage: "model: catalogue name, HF id or config.json path; also filters rows"},
			&cli.StringFlag{Name: "gpu", Usage: "GPU name; also filters rows (h100 matches h100_sxm, h100-80gb)"},
			&cli.IntFlag{Name: "tp", Usage: "tensor-parallel degree; also filters rows", DefaultText: "1, rows not filtered"},
			&cli.StringFlag{Name: "engine", Usage: "serving engine (filters serving points; recorded in the file)"},
			&cli.StringFlag{Name: "engine-version", Usage: "engine version (filters serving points; recorded in the file)"},
			&cli.StringFlag{Name: "precision", Usage: "serving-points precision filter: native (the checkpoint's dtype), fp8, fp4, ..."},
			&cli.StringFlag{Name: "weight-dtype", Usage: "deployment weight dtype (default: the model's, or the serving point's precision)"},
			&cli.StringFlag{Name: "kv-dtype", Usage: "KV cache dtype"},
			&cli.IntFlag{Name: "max-num-seqs", Usage: "engine max_num_seqs (default: meta.json, else vllm serve's for the GPU; for serving points each point's concurrency, as aiconfigurator launched it)"},
			&cli.IntFlag{Name: "max-num-batched-tokens", Usage: "engine token budget per step (default: meta.json, else vllm serve's for the GPU: 8192 on GPUs of 70 GiB or more but A100, else 2048; for serving points concurrency + isl + 1500, as aiconfigurator launched it)"},
			&cli.Int64Flag{Name: "kv-blocks", Usage: "KV blocks (default: meta.json, else from GPU memory)"},
			&cli.IntFlag{Name: "block-size", Usage: "KV block size in tokens (default 16)"},
			&cli.Float64Flag{Name: "gpu-memory-utilization", Usage: "fraction of GPU memory vLLM may use (default 0.9)"},
			&cli.StringFlag{Name: "features", Value: "tokens", Usage: "feature set: plain, tokens, roofline, roofline-scale, or a comma list of lib/latency/fitted features"},
			&cli.Float64Flag{Name: "holdout", Usage: "fraction of rows held out for testing (seeded)", DefaultText: "none"},
			&cli.IntFlag{Name: "kfold", Usage: "k-fold cross-validation (step-level fits)", DefaultText: "off"},
			&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the train/test split"},
			&cli.IntFlag{Name: "chain-length", Usage: "serving points: requests per closed-loop client (default max(10, ⌈24/C⌉))"},
			&cli.IntFlag{Name: "max-evals", Value: 300, Usage: "Nelder–Mead budget: simulations of the training set"},
			&cli.IntFlag{Name: "workers", Value: 2, Usage: "goroutines simulating points (at most 2)"},
			&cli.BoolFlag{Name: "evaluate", Usage: "fit nothing: report the errors of --latency on the data"},
			&cli.StringFlag{Name: "latency", Value: "auto", Usage: "with --evaluate: roofline, fitted or auto"},
			&cli.StringFlag{Name: "coefficients", Usage: "with --evaluate: coefficients `FILE` to judge"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "coefficients YAML `FILE` (- for stdout); DIR/ writes DIR/<model>/<gpu>-tp<N>-<engine>-<version>.yaml, and a fit that would replace a shipped file goes to the user directory ($BLIS_USER_COEFFICIENTS, else ~/.config/blis/coefficients)"},
			&cli.BoolFlag{Name: "force", Usage: "let -o replace an existing file, a shipped one included"},
			&cli.StringFlag{Name: "report", Usage: "write the fit report to `FILE` instead of stderr"},
			&cli.IntFlag{Name: "residuals", Value: 40, Usage: "residual rows shown (0 = all)"},
			&cli.StringFlag{Name: "relative-to", Usage: "write source paths relative to this directory (for committed files)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cliutil.Usage("unexpected arguments %v: inputs are given with --step-times, --requests, --serving-points or --open-loop", c.Args().Slice())
			}
			terms, err := fit.ParseAlphaTerms(c.String("fit-alpha"))
			if err != nil {
				return cliutil.Usage("--fit-alpha: %v", err)
			}
			switch c.String("async-scheduling") {
			case "", "on", "off":
			default:
				return cliutil.Usage("--async-scheduling: expected on or off, found %q", c.String("async-scheduling"))
			}
			cmd := &calibration{
				StepTimes: c.String("step-times"), Requests: c.String("requests"), ServingPoints: c.String("serving-points"),
				OpenLoop: c.String("open-loop"), AlphaTerms: terms, HoldTerms: c.Bool("hold-terms"),
				EngineConfig: c.String("engine-config"), Test: c.String("test"), TestEngineConfig: c.String("test-engine-config"),
				TestModel: c.String("test-model"), TestGPU: c.String("test-gpu"), TestTP: c.Int("test-tp"),
				Dep: fit.Deployment{Model: c.String("model"), GPU: c.String("gpu"), TP: c.Int("tp"),
					WeightDtype: c.String("weight-dtype"), KVDtype: c.String("kv-dtype"),
					Engine: c.String("engine"), Version: c.String("engine-version"),
					MaxNumSeqs: c.Int("max-num-seqs"), MaxNumBatchedTokens: c.Int("max-num-batched-tokens"),
					KVBlocks: c.Int64("kv-blocks"), BlockSize: c.Int("block-size"), GPUMemUtil: c.Float64("gpu-memory-utilization"),
					AsyncScheduling: c.String("async-scheduling")},
				Precision: c.String("precision"), Features: c.String("features"),
				Holdout: c.Float64("holdout"), KFold: c.Int("kfold"), Seed: c.Uint64("seed"), PerChain: c.Int("chain-length"),
				MaxEvals: c.Int("max-evals"), Workers: c.Int("workers"),
				Evaluate: c.Bool("evaluate"), Latency: c.String("latency"), Coefficients: c.String("coefficients"),
				Output: c.String("output"), ReportPath: c.String("report"), Residuals: c.Int("residuals"), Quiet: c.Bool("quiet"), Force: c.Bool("force"),
			}
			if base := c.String("relative-to"); base != "" {
				cmd.DisplayPaths = fit.RelPath(base)
			}
			// Input errors (lib/measure, lib/trace, lib/convert, too few
			// points) carry BadInput, which cliutil maps to exit 2.
			return cmd.Run(os.Stdout, c.App.ErrWriter)
		},
	}
}
