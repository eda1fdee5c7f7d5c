package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"blis-sim": func() { os.Exit(cliutil.RunArgs(app(), os.Args, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar against the real command.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"mkrequests": mkrequests, "mkbadtable": mkbadtable, "dumpresults": dumpresults, "dumpmeta": dumpmeta},
	})
}

// mkrequests CSV OUT [sorted] writes the rows of CSV (id,arrival_us,input,
// output,depends_on separated by ;,kind,delay_us) as a requests table.
func mkrequests(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: mkrequests CSV OUT [sorted]")
	}
	rows, err := csv.NewReader(strings.NewReader(ts.ReadFile(args[0]))).ReadAll()
	ts.Check(err)
	md := trace.NewMeta()
	if len(args) > 2 && args[2] == "sorted" {
		md.Set(trace.MetaSorted, "arrival")
	}
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(ts.MkAbs(args[1]), nil, schema)
	ts.Check(err)
	w := trace.NewRequestWriter(sink, schema)
	num := func(s string) int64 {
		if s == "" {
			return trace.Null
		}
		v, err := strconv.ParseInt(s, 10, 64)
		ts.Check(err)
		return v
	}
	for i, f := range rows {
		r := trace.NewRequest(f[0])
		r.ArrivalUS = num(f[1])
		r.InputTokens, r.OutputTokens = int32(num(f[2])), int32(num(f[3]))
		if f[4] != "" {
			r.DependsOn = strings.Split(f[4], ";")
		}
		if f[5] != "" {
			r.Kind = f[5]
		}
		if f[6] != "" {
			r.DelayUS = num(f[6])
		}
		r.SourceRow = int64(i + 1)
		ts.Check(w.Write(&r))
	}
	ts.Check(w.Close())
}

// mkbadtable OUT writes a requests table without its token columns.
func mkbadtable(ts *testscript.TestScript, neg bool, args []string) {
	md := trace.NewMeta()
	schema := arrow.NewSchema([]arrow.Field{{Name: "request_id", Type: arrow.BinaryTypes.String}, {Name: "arrival_us", Type: arrow.PrimitiveTypes.Int64}}, nil)
	_ = md
	sink, err := trace.Create(ts.MkAbs(args[0]), nil, schema)
	ts.Check(err)
	b := array.NewRecordBuilder(trace.Alloc, schema)
	b.Field(0).(*array.StringBuilder).Append("a")
	b.Field(1).(*array.Int64Builder).Append(0)
	rec := b.NewRecordBatch()
	ts.Check(sink.Write(rec))
	rec.Release()
	b.Release()
	ts.Check(sink.Close())
}

// dumpresults FILE prints the outcome columns of a results table, one row
// per line, in the table's order.
func dumpresults(ts *testscript.TestScript, neg bool, args []string) {
	src, err := trace.Open(ts.MkAbs(args[0]), nil)
	ts.Check(err)
	defer src.Close()
	rs, err := trace.ReadAllResults(src)
	ts.Check(err)
	n := func(v int64) string {
		if v == trace.Null {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	for _, r := range rs {
		fmt.Fprintf(ts.Stdout(), "%s %s inst=%d arrival=%s enq=%s first=%s fin=%s ttft=%s e2e=%s gen=%d %q wait=%s\n", r.ID, r.Status, r.InstanceID,
			n(r.ArrivalUS), n(r.EnqueuedUS), n(r.FirstTokenUS), n(r.FinishedUS), n(r.TTFTUS), n(r.E2EUS), r.GeneratedTokens, r.DropReason, n(r.ClientWaitUS))
	}
}

// dumpmeta FILE PREFIX prints the table's schema metadata keys starting
// with PREFIX, sorted.
func dumpmeta(ts *testscript.TestScript, neg bool, args []string) {
	src, err := trace.Open(ts.MkAbs(args[0]), nil)
	ts.Check(err)
	defer src.Close()
	md := src.Schema().Metadata()
	keys := append([]string(nil), md.Keys()...)
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, args[1]) {
			v, _ := md.GetValue(k)
			fmt.Fprintf(ts.Stdout(), "%s=%s\n", k, v)
		}
	}
}

// TestOutputThroughSymlink: -o through a symbolic link writes its target
// and keeps the link (a temporary file renamed over the link replaced it,
// and over /dev/stdout would have replaced the system's link).
func TestOutputThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.arrows")
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(in, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, schema)
	r := trace.NewRequest("a")
	r.ArrivalUS, r.InputTokens, r.OutputTokens = 0, 10, 2
	if err := w.Write(&r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	target, link := filepath.Join(dir, "sub", "res.arrow"), filepath.Join(dir, "link.arrow")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lin.yaml"), []byte("latency: {beta: [1000, 1, 10]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if code := cliutil.RunArgs(app(), []string{"blis-sim", "-q", "--kv-blocks", "10", "--cluster", filepath.Join(dir, "lin.yaml"), "-o", link, in}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a symlink", link)
	}
	src, err := trace.Open(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rs, err := trace.ReadAllResults(src)
	if err != nil || len(rs) != 1 || rs[0].Status != trace.StatusCompleted {
		t.Fatalf("target: %v %+v", err, rs)
	}
}

// TestOutputToSpecialFile writes -o and --steps to named pipes: they are
// written in place, never replaced by a regular file (a temporary file
// renamed over /dev/null replaced the device).
func TestOutputToSpecialFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.arrows")
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(in, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, schema)
	r := trace.NewRequest("a")
	r.ArrivalUS, r.InputTokens, r.OutputTokens = 0, 10, 2
	if err := w.Write(&r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"results", []string{"-o", "PIPE"}},
		{"steps", []string{"-o", filepath.Join(dir, "res.arrows"), "--steps", "PIPE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipe := filepath.Join(dir, tc.name+".pipe.arrow")
			if err := syscall.Mkfifo(pipe, 0o600); err != nil {
				t.Skip("no named pipes:", err)
			}
			got := make(chan int64, 1)
			go func() {
				f, err := os.Open(pipe)
				if err != nil {
					got <- -1
					return
				}
				n, _ := io.Copy(io.Discard, f)
				f.Close()
				got <- n
			}()
			args := []string{"blis-sim", "-q", "--kv-blocks", "10", "--latency", "linear", "--cluster", filepath.Join(dir, "lin.yaml")}
			if err := os.WriteFile(filepath.Join(dir, "lin.yaml"), []byte("latency: {beta: [1000, 1, 10]}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.args {
				if a == "PIPE" {
					a = pipe
				}
				args = append(args, a)
			}
			var stderr strings.Builder
			if code := cliutil.RunArgs(app(), append(args, in), &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			select {
			case n := <-got:
				if n <= 0 {
					t.Fatalf("read %d bytes from the pipe", n)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("nothing was written to the pipe")
			}
			fi, err := os.Lstat(pipe)
			if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				t.Fatalf("%s is no longer a named pipe: %v %v", pipe, fi.Mode(), err)
			}
		})
	}
}
