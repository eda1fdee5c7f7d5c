package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/latency/fitted"
)

const td = "../../lib/measure/testdata/"

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,model_path,system,backend,backend_version,precision,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"+
		"a,m,h100_sxm,vllm,1,,agg,10,10,4,1,5,-3\n"), 0o644)
	// A test point of another engine version: not the trained deployment.
	otherVer := filepath.Join(dir, "other.csv")
	os.WriteFile(otherVer, []byte("id,model_path,system,backend,backend_version,precision,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"+
		"a,Qwen/Qwen3-32B,h100_sxm,vllm,0.99.0,,agg,1024,128,8,4,120,11\n"), 0o644)
	out := filepath.Join(dir, "c.yaml")
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"no input", []string{}, 2, "expected exactly one of --step-times, --requests, --serving-points"},
		{"two inputs", []string{"--step-times", "a", "--requests", "b"}, 2, "found 2"},
		{"missing file", []string{"--step-times", filepath.Join(dir, "nope.csv")}, 2, "nope.csv"},
		{"bad row", []string{"--serving-points", bad, "--model", "m", "--gpu", "h100"}, 2, "bad.csv:2: field silicon_tpot_ms: expected a positive value, found -3"},
		{"holdout range", []string{"--step-times", td + "splitwise_h100_tp4.csv", "--holdout", "1.5"}, 2, "--holdout"},
		{"kfold with holdout", []string{"--step-times", td + "splitwise_h100_tp4.csv", "--kfold", "3", "--holdout", "0.2"}, 2, "--kfold cannot be combined"},
		{"several deployments", []string{"--serving-points", td + "silicon_h100_qwen3_32b.csv", "--model", "Qwen/Qwen3-32B"}, 2, "span several deployments"},
		{"test of another deployment", []string{"--serving-points", td + "silicon_h100_qwen3_32b.csv", "--model", "Qwen/Qwen3-32B", "--tp", "4", "--engine", "vllm", "--test", otherVer, "--max-evals", "5"}, 2,
			"other.csv: expected test points of the trained deployment Qwen/Qwen3-32B h100_sxm tp4 vllm-0.12.0 native, found Qwen/Qwen3-32B h100_sxm tp4 vllm-0.99.0 native"},
		{"unknown feature", []string{"--step-times", td + "splitwise_h100_tp4.csv", "--model", "llama2-70b", "--gpu", "h100", "--tp", "4", "--features", "const,bogus"}, 2, "bogus"},
		{"replay evaluate", []string{"--evaluate", "--latency", "roofline", "--requests", td + "llmss_rtx4090_head40.jsonl", "--engine-config", td + "llmss_rtx4090_meta.json"}, 0, "latency: roofline for llama-3.1-8b on rtx4090 tp1"},
		{"replay without a GPU", []string{"--evaluate", "--requests", td + "llmss_rtx4090_head40.jsonl", "--model", "llama-3.1-8b"}, 2, "the GPU is needed: neither given nor named by the run's engine config (pass --model and --gpu)"},
		{"serving evaluate", []string{"--evaluate", "--latency", "roofline", "--serving-points", td + "silicon_h100_qwen3_32b.csv", "--gpu", "h100", "--engine", "vllm", "--tp", "8", "--chain-length", "2"}, 0, "Qwen/Qwen3-32B h100_sxm tp8 vllm-0.12.0 native"},
		{"step fit", []string{"--step-times", td + "splitwise_h100_tp4.csv", "--model", "llama2-70b", "--gpu", "h100", "--tp", "4", "--kfold", "3", "-o", out}, 0, "Test error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			st := cliutil.RunArgs(app(), append([]string{"blis-calibrate", "-q"}, tc.args...), &stderr)
			if st != tc.status || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("status %d, want %d; stderr:\n%s\nwant it to contain %q", st, tc.status, stderr.String(), tc.stderr)
			}
		})
	}
	c, err := fitted.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "llama-2-70b" || c.GPU != "h100" || c.TP != 4 || c.Fit.Method != "nnls" || c.Fit.TestRows != 42 || len(c.Sources) != 1 || len(c.Sources[0].SHA256) != 64 {
		t.Errorf("written file %+v", c)
	}
}

// -o never replaces a file silently: a fit that would land on a shipped
// file goes to the user's directory (which blis-sim searches first), any
// other existing file needs --force (issue 10, item 6).
func TestOutputKeepsShippedFiles(t *testing.T) {
	const rel = "llama-2-70b/h100-tp4-splitwise-8f99e7dc.yaml"
	shipped, ok := coefficients.Shipped(rel)
	if !ok {
		t.Fatalf("%s is not shipped", rel)
	}
	repo, user := t.TempDir(), t.TempDir()
	t.Setenv("BLIS_USER_COEFFICIENTS", user)
	os.MkdirAll(filepath.Join(repo, "llama-2-70b"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, rel), shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	fitArgs := []string{"blis-calibrate", "-q", "--step-times", td + "splitwise_h100_tp4.csv", "--model", "llama2-70b", "--gpu", "h100", "--tp", "4",
		"--engine", "splitwise", "--engine-version", "8f99e7dc", "--kfold", "3"}
	run := func(extra ...string) (int, string) {
		var stderr bytes.Buffer
		st := cliutil.RunArgs(app(), append(append([]string(nil), fitArgs...), extra...), &stderr)
		return st, stderr.String()
	}
	st, msg := run("-o", repo+"/")
	if st != 0 || !strings.Contains(msg, "is a shipped file, left as it is") {
		t.Fatalf("status %d: %s", st, msg)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, rel)); string(b) != string(shipped) {
		t.Error("the shipped file was replaced")
	}
	if _, err := fitted.Load(filepath.Join(user, rel)); err != nil {
		t.Errorf("user file: %v", err)
	}
	// The user's file may be refitted in place.
	if st, msg := run("-o", repo+"/"); st != 0 {
		t.Fatalf("refit: status %d: %s", st, msg)
	}
	// Any other existing file needs --force, the shipped one included.
	other := filepath.Join(repo, "mine.yaml")
	os.WriteFile(other, []byte("x"), 0o644)
	if st, msg := run("-o", other); st != 2 || !strings.Contains(msg, "mine.yaml: the file exists; pass --force to replace it") {
		t.Fatalf("existing file: status %d: %s", st, msg)
	}
	if st, msg := run("-o", repo+"/", "--force"); st != 0 || strings.Contains(msg, "shipped") {
		t.Fatalf("--force: status %d: %s", st, msg)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, rel)); string(b) == string(shipped) {
		t.Error("--force did not replace the file")
	}
}
