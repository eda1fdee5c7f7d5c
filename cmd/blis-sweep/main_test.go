package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/internal/cliutil"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// runApp runs blis-sweep in process and returns its exit status, stdout and stderr.
func runApp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := app()
	a.Writer = &out
	code := cliutil.RunArgs(a, append([]string{"blis-sweep"}, args...), &errb)
	return code, out.String(), errb.String()
}

// A small synthetic sweep: 2 rates × 2 replica counts × 2 seeds = 8 runs.
const smallSpec = `name: small
workload:
  version: 1
  seed: 1
  horizon: 20s
  aggregate_rate: 2
  clients:
    - {name: c, input: {dist: uniform, min: 100, max: 900}, output: {dist: uniform, min: 20, max: 120}}
axes:
  workload.aggregate_rate: [2, 8]
  replicas: [1, 2]
  seed: {replications: 2}
`

func writeSpec(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(p, []byte(smallSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func countRecords(t *testing.T, out string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, "runs", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "expected one sweep spec"},
		{[]string{"--find", "most-replicas", spec}, 2, "--find: expected min-replicas or max-rate"},
		{[]string{"--find", "min-replicas", spec}, 2, "--slo: expected at least one constraint"},
		{[]string{"--find", "min-replicas", "--slo", "p99_ttft<=1s", "--slurm", spec}, 2, "does not combine with --slurm"},
		{[]string{"--shard-index", "1", spec}, 2, "--shard-index needs --shard-count"},
		{[]string{"--shard-count", "2", "--shard-index", "2", spec}, 2, "expected a shard index 0..1"},
		{[]string{"--format", "xml", spec}, 2, "--format"},
		{[]string{filepath.Join(dir, "nope.yaml")}, 2, "nope.yaml: no such file"},
		// --html draws collected points: runs that end before collecting have none.
		{[]string{"--html", "p.html", "--dry-run", spec}, 2, "does not combine with --dry-run"},
		{[]string{"--html", "p.html", "--k8s-job", spec}, 2, "does not combine with --k8s-job"},
		{[]string{"--html", "p.html", "--shard-count", "2", "--shard-index", "0", spec}, 2, "does not combine with --shard-count"},
		{[]string{"--html", "p.html", "--slurm", spec}, 2, "--html with --slurm needs --wait"},
	} {
		code, _, stderr := runApp(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("blis-sweep %q: exit %d, %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// A local sweep, a rerun, --dry-run, --collect and CSV through the binary's
// own entry point; sbatch missing is a clear error.
func TestLocal(t *testing.T) {
	dir := t.TempDir()
	spec := writeSpec(t, dir)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runApp(t, "-o", out, "--format", "csv", spec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "8 runs: 8 run now, 0 done before, 0 failed") {
		t.Errorf("stderr %q", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "point,workload.aggregate_rate,replicas,group,replications,failed,gpus,") {
		t.Errorf("CSV: %d lines, header %q", len(lines), lines[0])
	}
	code, _, stderr = runApp(t, "-o", out, spec)
	if code != 0 || !strings.Contains(stderr, "8 runs: 0 run now, 8 done before") {
		t.Errorf("rerun: exit %d, %q", code, stderr)
	}
	code, stdout, _ = runApp(t, "-o", out, "--dry-run", spec)
	if code != 0 || !strings.Contains(stdout, "4 points × 2 replications = 8 runs, 8 done") {
		t.Errorf("dry run: %q", stdout)
	}
	code, stdout, _ = runApp(t, "-o", out, "--collect", "--format", "json", "--metric", "ttft_p99_ms", spec)
	if code != 0 || !strings.Contains(stdout, `"ttft_p99_ms_ci95"`) {
		t.Errorf("collect: exit %d, %q", code, stdout)
	}
	// The points' page after a sweep (here a rerun: nothing to run), and
	// the capacity page of a search over the same runs.
	page := filepath.Join(dir, "points.html")
	code, _, stderr = runApp(t, "-o", out, "-q", "--html", page, spec)
	if html, _ := os.ReadFile(page); code != 0 || !bytes.Contains(html, []byte(`id="fig-m0-f0"`)) || !bytes.Contains(html, []byte("<h1>Sweep small</h1>")) {
		t.Errorf("--html: exit %d, %q; page of %d bytes", code, stderr, len(html))
	}
	capPage := filepath.Join(dir, "capacity.html")
	code, stdout, stderr = runApp(t, "-o", out, "-q", "--html", capPage, "--find", "min-replicas", "--slo", "p99_ttft<=10s", spec)
	html, _ := os.ReadFile(capPage)
	if code != 0 || !bytes.Contains(html, []byte(`id="fig-cap-0"`)) || !bytes.Contains(html, []byte(`id="fig-cap-map"`)) || !bytes.Contains(html, []byte("workload.aggregate_rate=2: <b>replicas = 1</b>")) {
		t.Errorf("--find --html: exit %d, %q, %q; page:\n%s", code, stdout, stderr, html)
	}
	t.Setenv("PATH", dir)
	code, _, stderr = runApp(t, "-o", filepath.Join(dir, "other"), "--slurm", spec)
	if code != 1 || !strings.Contains(stderr, "sbatch is not on PATH") {
		t.Errorf("--slurm without sbatch: exit %d, %q", code, stderr)
	}
}

// The Kubernetes manifest runs every shard; a pod's index comes from
// $JOB_COMPLETION_INDEX.
func TestK8sJob(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir)
	t.Chdir(dir)
	code, stdout, stderr := runApp(t, "--k8s-job", "--shards", "3", "--image", "registry.example/blis:1", "-o", "small.sweep", "small.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var job struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Parallelism    int    `yaml:"parallelism"`
			Template       struct {
				Spec struct {
					RestartPolicy string `yaml:"restartPolicy"`
					Containers    []struct {
						Image        string   `yaml:"image"`
						Command      []string `yaml:"command"`
						VolumeMounts []struct {
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					Volumes []struct {
						PVC struct {
							ClaimName string `yaml:"claimName"`
						} `yaml:"persistentVolumeClaim"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(stdout), &job); err != nil {
		t.Fatalf("manifest is not YAML: %v\n%s", err, stdout)
	}
	s := job.Spec
	c := s.Template.Spec.Containers
	if job.APIVersion != "batch/v1" || job.Kind != "Job" || s.CompletionMode != "Indexed" || s.Completions != 3 ||
		s.Template.Spec.RestartPolicy != "Never" || len(c) != 1 || c[0].Image != "registry.example/blis:1" ||
		len(s.Template.Spec.Volumes) != 1 || s.Template.Spec.Volumes[0].PVC.ClaimName != "blis-sweep" {
		t.Fatalf("manifest: %+v", job)
	}
	want := []string{"blis-sweep", "-q", "--out", "/work/small.sweep", "--shard-count", "3", "/work/small.yaml"}
	if strings.Join(c[0].Command, " ") != strings.Join(want, " ") {
		t.Errorf("command %q, want %q", c[0].Command, want)
	}
	// What a pod runs: the command with the index from the Job controller.
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	code, _, stderr = runApp(t, "-q", "--out", "small.sweep", "--shard-count", "3", "small.yaml")
	if code != 0 {
		t.Fatalf("pod 1: exit %d: %s", code, stderr)
	}
	if n := countRecords(t, "small.sweep"); n != 3 { // runs 1, 4, 7 of 8
		t.Errorf("pod 1 wrote %d records, want 3", n)
	}
	code, _, stderr = runApp(t, "--collect", "--shard-count", "3", "--out", "small.sweep", "small.yaml")
	if code != 1 || !strings.Contains(stderr, "5 of 8 runs have no result yet") || !strings.Contains(stderr, "shards with missing runs (of 3): 0,2") {
		t.Errorf("collect after one pod: exit %d, %q", code, stderr)
	}
}

// TestSlurm runs the sweep as a real job array on a single-node Slurm
// cluster started from Debian's slurm-wlm and munge packages
// (scripts/slurm-local.sh; .ci/run installs them and sets
// BLIS_REQUIRE_SLURM=1 so that CI fails rather than skips). One task is
// made to fail; --collect names its shard and --slurm resubmits only it.
func TestSlurm(t *testing.T) {
	require := os.Getenv("BLIS_REQUIRE_SLURM") == "1"
	skip := func(why string) {
		if require {
			t.Fatalf("BLIS_REQUIRE_SLURM=1 but %s", why)
		}
		t.Skip(why + " (apt-get install slurm-wlm munge, as root)")
	}
	for _, b := range []string{"munged", "slurmctld", "slurmd", "sbatch", "sinfo"} {
		if _, err := exec.LookPath(b); err != nil {
			skip(b + " is not installed")
		}
	}
	if os.Geteuid() != 0 {
		skip("the private Slurm cluster needs root")
	}
	// munged (user munge) must reach its socket: a world-searchable directory.
	dir, err := os.MkdirTemp("", "blis-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(repoRoot(), "scripts", "slurm-local.sh")
	state := filepath.Join(dir, "slurm")
	start := exec.Command(script, "start", state)
	start.Stderr = os.Stderr
	so, err := start.Output()
	if err != nil {
		t.Fatalf("starting Slurm: %v\n%s", err, so)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", state).CombinedOutput(); err != nil {
			t.Errorf("stopping Slurm: %v: %s", err, out)
		}
	})
	var conf string
	sc := bufio.NewScanner(bytes.NewReader(so))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SLURM_CONF="); ok {
			conf = v
		}
	}
	if conf == "" {
		t.Fatalf("slurm-local.sh printed no SLURM_CONF: %s", so)
	}

	bin := filepath.Join(dir, "blis-sweep")
	build := exec.Command("go", "build", "-o", bin, "./cmd/blis-sweep")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	spec := writeSpec(t, dir)
	sweep := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	logs := func(out string) string {
		m, _ := filepath.Glob(filepath.Join(out, "slurm", "*.log"))
		var b strings.Builder
		for _, f := range m {
			c, _ := os.ReadFile(f)
			b.WriteString("== " + f + "\n" + string(c))
		}
		return b.String()
	}

	// 1. The whole sweep as a 4-task array, waited for and collected.
	out1 := filepath.Join(dir, "out1")
	code, stdout, stderr := sweep("--slurm", "--shards", "4", "--wait", "-o", out1, spec)
	if code != 0 {
		t.Fatalf("--slurm --wait: exit %d\n%s\n%s", code, stderr, logs(out1))
	}
	if !strings.Contains(stderr, "shards 0-3 of 4 (8 of 8 runs to do)") || !strings.Contains(stdout, "workload.aggregate_rate") {
		t.Errorf("stderr %q\nstdout %q", stderr, stdout)
	}
	if n := countRecords(t, out1); n != 8 {
		t.Fatalf("%d records, want 8\n%s", n, logs(out1))
	}
	if _, err := os.Stat(filepath.Join(out1, "summary.parquet")); err != nil {
		t.Fatal(err)
	}

	// 2. Task 2 fails (a wrapper standing in for a node that died).
	wrapper := filepath.Join(dir, "flaky.sh")
	flaky := "#!/bin/sh\nif [ \"$SLURM_ARRAY_TASK_ID\" = 2 ]; then echo 'node lost' >&2; exit 1; fi\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(flaky), 0o755); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "out2")
	code, _, stderr = sweep("--slurm", "--shards", "4", "--wait", "--exec", wrapper, "-o", out2, spec)
	if code != 1 || !strings.Contains(stderr, "a task failed") || !strings.Contains(stderr, "2 of 8 runs have no result yet") ||
		!strings.Contains(stderr, "shards with missing runs (of 4): 2;") {
		t.Fatalf("with a failing task: exit %d\n%s\n%s", code, stderr, logs(out2))
	}
	if n := countRecords(t, out2); n != 6 {
		t.Fatalf("%d records after a failed task, want 6", n)
	}
	code, _, stderr = sweep("--collect", "-o", out2, spec)
	if code != 1 || !strings.Contains(stderr, "shards with missing runs (of 4): 2;") {
		t.Errorf("--collect: exit %d, %q", code, stderr)
	}
	// 3. Resubmitting sends only shard 2.
	code, _, stderr = sweep("--slurm", "--wait", "-o", out2, spec)
	if code != 0 || !strings.Contains(stderr, "shards 2 of 4 (2 of 8 runs to do)") {
		t.Fatalf("resubmission: exit %d\n%s\n%s", code, stderr, logs(out2))
	}
	a, _ := os.ReadFile(filepath.Join(out1, "points.parquet"))
	b, _ := os.ReadFile(filepath.Join(out2, "points.parquet"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("the two Slurm sweeps' summaries differ")
	}
	// 4. Nothing left: nothing submitted.
	code, _, stderr = sweep("--slurm", "-o", out2, spec)
	if code != 0 || !strings.Contains(stderr, "nothing to submit") {
		t.Errorf("all done: exit %d, %q", code, stderr)
	}
}
