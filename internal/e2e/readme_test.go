package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the commands of the README's ```sh blocks, in
// order: continuation lines joined, comments and blank lines dropped.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in, cur := false, ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		line = stripComment(line)
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		if c := strings.Join(strings.Fields(cur), " "); c != "" {
			cmds = append(cmds, c)
		}
		cur = ""
	}
	return cmds
}

// stripComment removes a shell comment (a # after a blank, outside quotes).
func stripComment(line string) string {
	var q byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[:i], " \t")
		}
	}
	return line
}

// readmeSkips are the README commands this test does not run, and why.
// Everything else runs exactly as written, in order, in one directory
// laid out like a checkout (bin/, testdata/, examples/, ... and
// ../shared when it exists), with the user's own files the README
// assumes (my.csv, my-gpu.yaml, ...) made up beforehand.
var readmeSkips = []struct{ re, why string }{
	{`^make (demo|test)\b`, "make demo is demo_pipeline.txtar; make test is CI itself"},
	{`^make coefficients\b`, "regenerates the shipped coefficients (minutes)"},
	{`^go run \./bench/accuracy\b`, "a measurement harness over ../shared, minutes long"},
	{`--slurm`, "needs a Slurm cluster"},
	{`^go run \./bench/fakellm .*&$`, "starts a server on port 8000 (blis-load's tests run their own)"},
	{`^bin/blis-serve .*&$`, "starts a server on port 8000 (lib/serve's tests run their own)"},
	{`blis-load --url`, "needs a server"},
	{`real\.arrow`, "needs blis-load's output (a server)"},
}

func TestREADMECommands(t *testing.T) {
	bin := binaries(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := repoRoot()
	shared := filepath.Join(repo, "..", "shared")
	haveShared := false
	if _, err := os.Stat(filepath.Join(shared, "data")); err == nil {
		haveShared = true
		if err := os.Symlink(shared, filepath.Join(root, "shared")); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"bin": bin}
	for _, d := range []string{"testdata", "examples", "lib", "coefficients", "bench", "cmd", "go.mod", "go.sum", "internal"} {
		links[d] = filepath.Join(repo, d)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The user's own files the README's commands name.
	files := map[string]string{
		"my.csv":      "ts,prompt,completion\n0,512,128\n250,1024,64\n900,300,300\n",
		"my-gpu.yaml": "name: my-gpu\nbf16_tflops: 900\nfp8_tflops: 1800\nhbm_tb_s: 3\nmemory_gib: 80\nlink_gb_s: 400\nlink_latency_us: 5\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(work, "my-model"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(repo, "lib", "roofline", "models", "qwen3-32b", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, "my-model", "config.json"), cfg, 0o644)
	env := append(os.Environ(),
		"BLIS_USER_COEFFICIENTS="+filepath.Join(root, "user-coefficients"), // never the shipped files
		"HOME="+root)
	setup := []string{ // an earlier run, for --compare baseline.arrow
		"bin/blis-convert testdata/azure2023_code.csv | bin/blis-sim --replicas 2 -q -o baseline.arrow",
	}
	vars := regexp.MustCompile(`^[A-Z_]+=\S+$`)
	var prelude []string // the README's variable assignments (S=..., L=...)
	ran := 0
	for i, c := range append(setup, readmeCommands(t)...) {
		if vars.MatchString(c) {
			prelude = append(prelude, c)
			continue
		}
		skip := ""
		for _, s := range readmeSkips {
			if regexp.MustCompile(s.re).MatchString(c) {
				skip = s.why
				break
			}
		}
		if skip == "" && !haveShared && (strings.Contains(c, "../shared") || strings.Contains(c, "$S") || strings.Contains(c, "$L")) {
			skip = "needs ../shared"
		}
		if skip == "" && c == "bench/sim.sh" && os.Getenv("BLIS_README_BENCH") == "" {
			skip = "a benchmark (a minute on 2 busy cores); BLIS_README_BENCH=1 runs it too"
		}
		if skip != "" {
			t.Logf("skip %q: %s", c, skip)
			continue
		}
		script := "set -eo pipefail\n" + strings.Join(prelude, "\n") + "\n" + c + " > /dev/null\n"
		if strings.Contains(c, ">") {
			script = "set -eo pipefail\n" + strings.Join(prelude, "\n") + "\n" + c + "\n"
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = work
		cmd.Env = env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("README command %d failed: %s\n%v\n%s", i, c, err, out)
			continue
		}
		t.Logf("ran %q (%s)", c, time.Since(start).Round(time.Millisecond))
		ran++
	}
	if ran < 30 {
		t.Fatalf("ran only %d README commands", ran)
	}
}
