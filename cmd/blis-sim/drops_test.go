package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

// writeReqs writes a sorted requests table: each row id, arrival (µs),
// input and output tokens, and the id it depends on ("" for none).
func writeReqs(t *testing.T, path string, rows [][5]any) {
	t.Helper()
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	s := trace.RequestsSchema(md)
	sink, err := trace.Create(path, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, s)
	for _, f := range rows {
		r := trace.NewRequest(f[0].(string))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = f[1].(int64), int32(f[2].(int)), int32(f[3].(int))
		if d := f[4].(string); d != "" {
			r.DependsOn, r.ArrivalUS = []string{d}, trace.Null
		}
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDropReasons: dropped requests are counted per reason on stderr, and a
// run in which every request is dropped exits 2 saying why (issue 10, item 4:
// --kv-blocks 10 dropped every request and exited 0 in silence).
func TestDropReasons(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "reqs.arrows")
	writeReqs(t, in, [][5]any{
		{"a", int64(1000), 100, 20, ""},
		{"big", int64(1000), 20000, 20, ""},
		{"b", int64(0), 50, 10, "a"},
		{"c", int64(2000), 30, 5, ""},
	})
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"some dropped", []string{"--kv-blocks", "100"}, 0, []string{
			"4 requests: 3 completed, 1 dropped, 0 rejected",
			"       1 dropped   needs more KV blocks than a replica has (e.g. needs 1252 KV blocks (20019 tokens), an instance has 100)\n",
		}},
		{"all dropped", []string{"--kv-blocks", "2"}, 2, []string{
			"4 requests: 0 completed, 4 dropped, 0 rejected",
			"       3 dropped   needs more KV blocks than a replica has (e.g. needs 8 KV blocks (119 tokens), an instance has 2)\n",
			"       1 dropped   a dependency was dropped (e.g. dependency a dropped)\n",
			"blis-sim: every request was dropped, rejected or timed out, none served: 3 dropped: needs more KV blocks than a replica has (e.g. needs 8 KV blocks (119 tokens), an instance has 2); 1 dropped: a dependency was dropped (e.g. dependency a dropped)\n",
		}},
		// Issue 32, item 9: 0 completed, the rest timed out or dropped,
		// exited 0.
		{"all timed out or dropped", []string{"--kv-blocks", "100", "--client-timeout", "1us"}, 2, []string{
			"4 requests: 0 completed, 2 dropped, 0 rejected, 2 timed out",
			"       1 dropped   a dependency was timed_out (e.g. dependency a timed_out)\n",
			"       2 timed_out client timeout (e.g. client timeout after 1 µs)\n",
			"blis-sim: every request was dropped, rejected or timed out, none served: ",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := cliutil.RunArgs(app(), append(append([]string{"blis-sim"}, c.args...), "-o", filepath.Join(dir, c.name+".arrows"), in), &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
	// Quiet: no summary, but the failure still says why.
	var stderr bytes.Buffer
	if code := cliutil.RunArgs(app(), []string{"blis-sim", "-q", "--kv-blocks", "2", "-o", filepath.Join(dir, "q.arrows"), in}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "every request was dropped, rejected or timed out") || strings.Contains(stderr.String(), "4 requests:") {
		t.Errorf("-q: exit %d\n%s", code, stderr.String())
	}
}
