package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/blis-sim/blis/lib/cliutil"
	"github.com/blis-sim/blis/lib/trace"
	"github.com/rogpeppe/go-internal/testscript"
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"mkrequests": mkrequests, "mkbadtable": mkbadtable, "dumpresults": dumpresults},
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
		fmt.Fprintf(ts.Stdout(), "%s %s inst=%d arrival=%s enq=%s first=%s fin=%s ttft=%s e2e=%s gen=%d %q\n", r.ID, r.Status, r.InstanceID,
			n(r.ArrivalUS), n(r.EnqueuedUS), n(r.FirstTokenUS), n(r.FinishedUS), n(r.TTFTUS), n(r.E2EUS), r.GeneratedTokens, r.DropReason)
	}
}
