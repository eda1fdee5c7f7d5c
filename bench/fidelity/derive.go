package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/blis-sim/blis/lib/measure"
)

// openLoopTable is the derived table of the open-loop runs (see
// deriveOpenLoop), relative to the repository root.
const openLoopTable = "lib/measure/testdata/inference_perf_h100.csv"

// deriveOpenLoop reads every experiment of a checkout of
// inference-sim/training (default_args/*: exp-config.yaml,
// results/config.yaml, results/stage_N_lifecycle_metrics.json) and writes
// the derived table: the launch settings, the data: and load: sections
// inference-perf ran, and each stage's measured statistics. The repository
// carries no license: the table holds figures derived from it (numbers are
// facts) and none of its text or code.
func deriveOpenLoop(dir, commit string, w io.Writer) error {
	exps, err := filepath.Glob(filepath.Join(dir, "default_args", "*", "exp-config.yaml"))
	if err != nil {
		return err
	}
	if len(exps) == 0 {
		return fmt.Errorf("%s: expected default_args/*/exp-config.yaml (a checkout of inference-sim/training)", dir)
	}
	sort.Strings(exps)
	var all []measure.OpenLoopStage
	for _, e := range exps {
		st, err := measure.ReadOpenLoopRun(filepath.Dir(e), "h100")
		if err != nil {
			return err
		}
		all = append(all, st...)
	}
	return measure.WriteOpenLoopStages(w, []string{
		"Open-loop vLLM runs on H100 SXM driven by inference-perf: figures derived from inference-sim/training",
		"(https://github.com/inference-sim/training) at commit " + commit + ", default_args/<experiment>/exp-config.yaml,",
		"results/config.yaml (the data:, load:, api: sections and server.ignore_eos, as inference-perf resolved them)",
		"and results/stage_<N>_lifecycle_metrics.json. The repository carries no license: only numbers are kept.",
		"Regenerate: go run ./bench/fidelity -derive-open-loop DIR -source-commit SHA > " + openLoopTable,
	}, all)
}

func writeDerived(dir, commit string) error {
	return deriveOpenLoop(dir, commit, os.Stdout)
}

func writeDerivedSteps(dir, commit string) error {
	return deriveSteps(dir, commit, os.Stdout)
}
