package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

func runApp(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := app()
	a.Writer = &out
	code := cliutil.RunArgs(a, append([]string{"blis-serve"}, args...), &errb)
	return code, errb.String()
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--speedup", "0"}, "--speedup: expected a number > 0"},
		{[]string{"--block-size", "0"}, "--block-size: expected a positive integer"},
		{[]string{"--default-max-tokens", "0"}, "--default-max-tokens"},
		{[]string{"requests.arrow"}, "takes no arguments"},
		{[]string{"--listen", "nowhere"}, "--listen"},
		{[]string{"--cluster", "does-not-exist.yaml"}, "does-not-exist.yaml"},
		{[]string{"--model", "no-such-model"}, "no-such-model"},
		{[]string{"--listen", "127.0.0.1:0", "-o", "/nonexistent-dir/x.arrow"}, "-o"},
	} {
		code, stderr := runApp(t, append([]string{"-q"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The real binary, a real signal: a request served, SIGINT, the results
// table written with it.
func TestServeAndInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "blis-serve")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "served.arrow")
	cmd := exec.Command(bin, "--replicas", "2", "--listen", "127.0.0.1:0", "--drain", "200ms", "-o", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	br := bufio.NewReader(stderr)
	var url string
	var log strings.Builder
	re := regexp.MustCompile(`on (http://\S+/v1)`)
	for url == "" {
		line, err := br.ReadString('\n')
		log.WriteString(line)
		if err != nil {
			t.Fatalf("no serving line: %v\n%s", err, log.String())
		}
		if m := re.FindStringSubmatch(line); m != nil {
			url = m[1]
		}
	}
	resp, err := http.Post(url+"/completions", "application/json", strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	// One that is still generating at the signal: cut at the drain's end.
	go http.Post(url+"/completions", "application/json", strings.NewReader(`{"model":"llama-3.1-8b","prompt":[1,2,3],"max_tokens":100000,"stream":true}`))
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(br)
	log.Write(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, log.String())
	}
	for _, want := range []string{"SIGINT: no more requests; waiting up to 200ms", "2 requests: 1 completed", "unfinished; of 1 in flight at the stop, 0 finished and 1 were cut"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, log.String())
		}
	}
	src, err := trace.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Meta().Table() != trace.TableResults {
		t.Fatalf("table kind %q", src.Meta().Table())
	}
	rr, err := trace.NewResultReader(src)
	if err != nil {
		t.Fatal(err)
	}
	var res []trace.Result
	for {
		buf, err := rr.Next(nil)
		res = append(res, buf...)
		if err != nil {
			break
		}
	}
	if len(res) != 2 || res[0].Status != trace.StatusCompleted || res[0].GeneratedTokens != 3 || res[1].Status != trace.StatusUnfinished {
		t.Fatalf("results %+v", res)
	}
}
