package report

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

func mustSLOs(t *testing.T, specs ...string) *slo.Set {
	t.Helper()
	s, err := slo.Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGolden(t *testing.T) {
	cases := []struct {
		golden string
		inputs []string
		opt    func(t *testing.T) Options
		format Format
	}{
		{"default.txt", []string{smallResults}, func(*testing.T) Options { return Options{} }, FormatTable},
		{"by_tenant_slo_class.md", []string{smallResults}, func(t *testing.T) Options {
			return Options{By: "tenant", SLOs: mustSLOs(t, "interactive:ttft=100ms,tpot=40ms", "batch:e2e=1s")}
		}, FormatMarkdown},
		{"per_class_slo.txt", []string{smallResults}, func(t *testing.T) Options {
			return Options{SLOs: mustSLOs(t, "interactive:ttft=100ms", "batch:e2e=1s")}
		}, FormatTable},
		{"by_instance_steps.csv", []string{smallResults}, func(t *testing.T) Options {
			return Options{By: "instance", Steps: smallSteps, SLOs: mustSLOs(t, "ttft=100ms,tpot=40ms")}
		}, FormatCSV},
		{"full.json", []string{smallResults}, func(t *testing.T) Options {
			return Options{By: "step_id", Steps: smallSteps, SLOs: mustSLOs(t, "ttft=100ms")}
		}, FormatJSON},
		{"compare.txt", []string{smallResults}, func(*testing.T) Options { return Options{Compare: smallRef} }, FormatTable},
		{"two_runs.md", []string{smallResults, smallRef}, func(*testing.T) Options { return Options{} }, FormatMarkdown},
		{"report.html", []string{smallResults}, func(t *testing.T) Options {
			return Options{Steps: smallSteps, SLOs: mustSLOs(t, "ttft=100ms"), Charts: true}
		}, ""},
		// Two runs of the same requests: the comparison pictures.
		{"compare.html", []string{smallResults, smallRef}, func(t *testing.T) Options { return Options{Charts: true} }, ""},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			var outs [2][]byte
			for k := range outs { // twice: output must be byte-identical across runs
				rep, err := Build(c.inputs, c.opt(t))
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				if c.format == "" {
					err = rep.WriteHTML(&buf)
				} else {
					err = rep.Write(&buf, c.format)
				}
				if err != nil {
					t.Fatal(err)
				}
				outs[k] = buf.Bytes()
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Fatal("two builds of the same report differ")
			}
			path := filepath.Join("testdata", "golden", c.golden)
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, outs[0], 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(outs[0], want) {
				t.Errorf("%s differs from golden (rerun with -update if intended):\n%s", path, outs[0])
			}
		})
	}
}

// TestHandChecked pins numbers worked out by hand from smallRows (see docs/report.md).
func TestHandChecked(t *testing.T) {
	rep, err := Build([]string{smallResults}, Options{SLOs: mustSLOs(t, "ttft=100ms")})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.runs[0]
	a := r.all
	if got, want := a.status, [nStatus]int64{7, 1, 1, 1, 1, 1, 0}; got != want {
		t.Errorf("status counts %v, want %v", got, want)
	}
	var sum int64
	for _, n := range a.status {
		sum += n
	}
	if sum != r.rows || a.total() != r.rows {
		t.Errorf("statuses sum to %d, total %d, rows %d", sum, a.total(), r.rows)
	}
	if r.start != 0 || r.end != 1702000 {
		t.Errorf("span [%d, %d], want [0, 1702000]", r.start, r.end)
	}
	// Completed llm: r1, r2, r3, s1-a, s1-c, s2-a.
	if a.completed != 6 || a.inTok != 100+200+150+300+400+50 || a.outTok != 11+21+6+4+3+2 {
		t.Errorf("completed %d in %d out %d", a.completed, a.inTok, a.outTok)
	}
	// TTFTs 51, 101, 130, 51, 101, 41 ms: sorted 41 51 51 101 101 130.
	if p50, p90, mx := a.d[mTTFT].Quantile(.5), a.d[mTTFT].Quantile(.9), a.d[mTTFT].Max(); p50 != 51000 || p90 != 130000 || mx != 130000 {
		t.Errorf("ttft p50 %v p90 %v max %v", p50, p90, mx)
	}
	// Scheduled llm: r1 r2 r3 r7 s1-a s1-c s2-a: input 1260, cached 450.
	if a.schedIn != 1260 || a.cached != 450 {
		t.Errorf("scheduled input %d cached %d", a.schedIn, a.cached)
	}
	// Under the SLO: 11 llm - 1 source_failed = 10; ttft <= 100 ms: r1, s1-a, s2-a.
	if a.sloN != 10 || a.sloAll != 3 {
		t.Errorf("slo n %d met %d", a.sloN, a.sloAll)
	}
	st := r.sess.summarize()
	if st.total != 2 || st.complete != 2 || st.d[sE2E].Max() != 702000 || st.d[sToolWait].Max() != 300000 || st.d[sCritSteps].Max() != 3 {
		t.Errorf("sessions %+v e2e max %v tool wait %v crit steps %v", st, st.d[sE2E].Max(), st.d[sToolWait].Max(), st.d[sCritSteps].Max())
	}
}

func TestDistExactMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 10, 101, 1000} {
		d := newDist(0)
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = rng.Int64N(1e7)
			d.Add(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.95, 0.99, 1} {
			rank := int(math.Ceil(q*float64(n))) - 1
			if got := d.Quantile(q); got != float64(vals[rank]) {
				t.Errorf("n=%d q=%v: got %v want %v", n, q, got, vals[rank])
			}
		}
	}
}

func TestDistHDRError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact, approx := newDist(1<<30), newDist(1000)
	for i := 0; i < 200000; i++ {
		v := int64(math.Exp(rng.NormFloat64()*1.5+11)) + 1 // lognormal around 60 ms
		exact.Add(v)
		approx.Add(v)
	}
	if approx.Exact() || !exact.Exact() {
		t.Fatal("limit not applied")
	}
	if exact.Mean() != approx.Mean() || exact.Max() != approx.Max() {
		t.Error("mean and max must stay exact")
	}
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
		e, a := exact.Quantile(q), approx.Quantile(q)
		if rel := math.Abs(a-e) / e; rel > hdrRelErr {
			t.Errorf("q=%v: hdr %v exact %v: relative error %.5f > %v", q, a, e, rel, hdrRelErr)
		}
	}
}

func TestRunBudget(t *testing.T) {
	b := &budget{max: 100_000}
	small, big1, big2 := newDistBudget(0, b), newDistBudget(0, b), newDistBudget(0, b)
	for i := int64(0); i < 70_000; i++ {
		big1.Add(i)
		big2.Add(i)
		if i < 1000 {
			small.Add(i)
		}
	}
	if !small.Exact() || big1.Exact() == big2.Exact() || b.used > b.max {
		t.Errorf("small exact %v, big1 %v, big2 %v, used %d", small.Exact(), big1.Exact(), big2.Exact(), b.used)
	}
	if q := big2.Quantile(0.5); math.Abs(q-34999)/34999 > hdrRelErr {
		t.Errorf("p50 after spill %v", q)
	}
}

func TestSeriesConserves(t *testing.T) {
	s := newSeries()
	var want float64
	for i := int64(0); i < 5000; i++ {
		s.addSpan(i*3001, 2500, 2)
		s.add(i*4000, 1)
		want += 2*2500 + 1
	}
	var got float64
	for _, v := range s.sum {
		got += v
	}
	if math.Abs(got-want) > 1e-6*want || len(s.sum) > maxBins {
		t.Errorf("sum %v want %v, %d bins", got, want, len(s.sum))
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{1, 1, 1, 1}, 1}, {[]float64{1, 0, 0, 0}, 0.25}, {[]float64{3, 1}, 0.8}} {
		if got := jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// writeRaw writes an IPC stream with the given columns (all int64 except
// status) for bad-input tests.
func writeRaw(t *testing.T, table string, strCols map[string][]string, intCols []string, rows int) string {
	t.Helper()
	var fields []arrow.Field
	var names []string
	for n := range strCols {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.BinaryTypes.String, Nullable: true})
	}
	for _, n := range intCols {
		fields = append(fields, arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	md := arrow.NewMetadata([]string{trace.MetaTable}, []string{table})
	schema := arrow.NewSchema(fields, &md)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, n := range names {
		for _, v := range strCols[n] {
			b.Field(i).(*array.StringBuilder).Append(v)
		}
	}
	for j := range intCols {
		for r := 0; r < rows; r++ {
			b.Field(len(names) + j).(*array.Int64Builder).Append(int64(r))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "raw.arrows")
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBadInput(t *testing.T) {
	all := append([]string(nil), summaryColumns[1:]...)
	without := func(drop string) []string {
		return slices.DeleteFunc(append([]string(nil), all...), func(s string) bool { return s == drop })
	}
	ok := map[string][]string{trace.ColRequestID: {"a", "b"}, trace.ColStatus: {"completed", "completed"}}
	cases := []struct {
		name string
		path string
		opt  Options
		want string
	}{
		{"requests table", writeRaw(t, trace.TableRequests, map[string][]string{trace.ColRequestID: {"a"}}, []string{trace.ColArrivalUS}, 1), Options{}, "is a requests table, expected a results table"},
		{"no status", writeRaw(t, "", map[string][]string{trace.ColRequestID: {"a"}}, all, 1), Options{}, "no column status"},
		{"no ttft", writeRaw(t, trace.TableResults, ok, without(trace.ColTTFTUS), 2), Options{}, "no column ttft_us"},
		{"by model without model", writeRaw(t, trace.TableResults, ok, all, 2), Options{By: "model"}, "--by model grouping: the table has no column model"},
		{"per-class slo without slo_class", writeRaw(t, trace.TableResults, ok, all, 2), Options{SLOs: mustSLOs(t, "batch:e2e=1s")}, "no column slo_class"},
		{"bad status", writeRaw(t, trace.TableResults, map[string][]string{trace.ColRequestID: {"a", "b"}, trace.ColStatus: {"completed", "finished"}}, all, 2), Options{},
			`row 2 (request b): column status: expected one of`},
		{"steps table is results", smallResults, Options{Steps: smallResults}, "is a results table, expected a steps table"},
		{"stdin twice", "-", Options{Steps: "-"}, "stdin (-) can be read only once, found it 2 times among the inputs"},
		{"stdin twice with compare", "-", Options{Compare: "-"}, "stdin (-) can be read only once, found it 2 times among the inputs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build([]string{c.path}, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestHTMLInBrowser loads the report in headless Chromium and checks that
// every chart drew data and no script error happened.
func TestHTMLInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install -y chromium): HTML not checked in a browser")
	}
	rep, err := Build([]string{smallResults, smallRef}, Options{Steps: smallSteps, SLOs: mustSLOs(t, "ttft=100ms")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := rep.WriteHTMLFile(page); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(page)
	for _, bad := range []string{"http://", "https://", "src=", "@import"} {
		if bytes.Contains(bytes.ReplaceAll(html, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil), []byte(bad)) {
			t.Errorf("page references %q: it must be self-contained", bad)
		}
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--virtual-time-budget=5000", "--dump-dom", "file://"+page)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := out.String()
	body := dom[strings.Index(dom, "<body"):]
	body = body[:strings.Index(body, ">")]
	for _, want := range []string{`data-rendered="ok"`, `data-errors="0"`, `data-charts="11"`} {
		if !strings.Contains(body, want) {
			t.Errorf("body %s: want %s", body, want)
		}
	}
}

// TestEdgeTables: an empty table and a table of tool calls only still give
// every format without NaN leaking as text other than "-"/null.
func TestEdgeTables(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.arrows")
	writeResults(t, empty, nil)
	tools := filepath.Join(dir, "tools.arrows")
	writeResults(t, tools, []res{{id: "t1", status: "completed", kind: "tool", sess: "s", arr: 5, inst: -1, enq: N, sched: N, first: N, fin: 10, tpot: N, delay: 5, recT: N, recE: N, recI: N}})
	for _, p := range []string{empty, tools} {
		rep, err := Build([]string{p}, Options{SLOs: mustSLOs(t, "ttft=1s"), By: "tenant"})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Format{FormatTable, FormatMarkdown, FormatCSV, FormatJSON} {
			var buf bytes.Buffer
			if err := rep.Write(&buf, f); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(buf.Bytes(), []byte("NaN")) || bytes.Contains(buf.Bytes(), []byte("Inf")) {
				t.Errorf("%s %s: NaN/Inf in output:\n%s", p, f, buf.String())
			}
		}
		var buf bytes.Buffer
		if err := rep.WriteHTML(&buf); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf.Bytes(), []byte("NaN")) || bytes.Contains(buf.Bytes(), []byte("Inf")) {
			t.Errorf("%s: NaN/Inf in HTML", p)
		}
	}
}

func TestFixedNoNegativeZero(t *testing.T) {
	for _, c := range []struct {
		v    float64
		prec int
		want string
	}{{-0.0001, 2, "0.00"}, {-0.004, 2, "0.00"}, {-0.005001, 2, "-0.01"}, {-3, 0, "-3"}, {math.Copysign(0, -1), 3, "0.000"}, {12.5, 1, "12.5"}} {
		if got := fixed(c.v, c.prec); got != c.want {
			t.Errorf("fixed(%v, %d) = %q, want %q", c.v, c.prec, got, c.want)
		}
	}
}

// FuzzReportValues feeds odd but well-typed values (negative, huge, out of
// order) through every view: the report must never panic.
func FuzzReportValues(f *testing.F) {
	f.Add("completed", "llm", int64(0), int64(100), int64(1000), int64(5000), int64(9000), int32(3), int32(1), int64(2000), "s", "x")
	f.Add("unfinished", "tool", int64(-5), int64(math.MaxInt64-1), int64(-1), int64(math.MinInt64+1), int64(1), int32(-4), int32(-1), int64(-7), "", "x")
	f.Add("completed", "llm", int64(1)<<62, int64(1)<<62, int64(1)<<62, int64(1)<<62, int64(1)<<62, int32(math.MaxInt32), int32(math.MaxInt32), int64(1)<<62, "s", "s")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, status, kind string, arr, enq, sched, first, fin int64, gen, cached int32, tpot int64, sess, dep string) {
		x := res{id: "a", status: status, kind: kind, tenant: "t", class: "c", sess: sess, arr: arr, inst: 0, enq: enq, sched: sched,
			first: first, fin: fin, gen: gen, in: gen, cached: cached, tpot: tpot, recT: first, recE: fin, recI: tpot}
		y := x
		y.id, y.arr, y.deps = "b", N, []string{dep, "a"}
		p := filepath.Join(dir, "f.arrows")
		writeResults(t, p, []res{x, y})
		rep, err := Build([]string{p}, Options{SLOs: mustSLOs(t, "ttft=1s", "c:e2e=2s"), By: "session"})
		if err != nil {
			return // bad status or kind: reported as an error, which is fine
		}
		for _, fm := range []Format{FormatTable, FormatJSON} {
			if err := rep.Write(io.Discard, fm); err != nil {
				t.Fatal(err)
			}
		}
		if err := rep.WriteHTML(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSLOMixedScope: with per-class SLOs, a metric's attainment counts only
// the rows that have a target for it, a metric no row targets is "-", and a
// group whose rows all fall under one SLO is labelled with it, not "mixed".
func TestSLOMixedScope(t *testing.T) {
	rowsOf := func(opt Options) [][]string {
		rep, err := Build([]string{smallResults}, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range rep.Tables {
			if tb.Name != "slo" {
				continue
			}
			var out [][]string
			for _, r := range tb.Rows {
				var s []string
				for _, c := range r {
					s = append(s, c.String())
				}
				out = append(out, s)
			}
			return out
		}
		t.Fatal("no slo table")
		return nil
	}
	slos := mustSLOs(t, "interactive:ttft=100ms", "batch:e2e=1s")
	// Interactive: r1 r3 r5 r7 s1-a s1-c (6), ttft <= 100 ms: r1, s1-a (2).
	// Batch: r2 r4 r6 s2-a (4; r8 is source_failed), e2e <= 1 s: s2-a (1).
	cases := []struct {
		name string
		opt  Options
		want [][]string // leading key cells, slo, requests, ttft, tpot, e2e, all
	}{
		{"all and per class", Options{SLOs: slos}, [][]string{
			{"all", "mixed", "10", "33.33", "-", "25.00", "30.00"},
			{"slo_class=batch", "e2e<=1s", "4", "-", "-", "25.00", "25.00"},
			{"slo_class=interactive", "ttft<=100ms", "6", "33.33", "-", "-", "33.33"},
		}},
		{"by tenant", Options{SLOs: slos, By: "tenant"}, [][]string{
			{"all", "mixed", "10", "33.33", "-", "25.00", "30.00"},
			{"a", "ttft<=100ms", "6", "33.33", "-", "-", "33.33"},
			{"b", "e2e<=1s", "4", "-", "-", "25.00", "25.00"},
		}},
		{"global only", Options{SLOs: mustSLOs(t, "ttft=100ms")}, [][]string{
			{"all", "ttft<=100ms", "10", "30.00", "-", "-", "30.00"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rowsOf(c.opt)
			if len(got) != len(c.want) {
				t.Fatalf("rows %v, want %v", got, c.want)
			}
			for i, w := range c.want {
				g := got[i][:len(w)]
				if strings.Join(g, "|") != strings.Join(w, "|") {
					t.Errorf("row %d: %v, want %v", i, g, w)
				}
			}
		})
	}
}

// TestOutputFiles: the HTML and text reports are ordinary 0644 files written
// through a temporary name (nothing is left beside them).
func TestOutputFiles(t *testing.T) {
	rep, err := Build([]string{smallResults}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		write func(string) error
	}{
		{"r.html", rep.WriteHTMLFile},
		{"r.json", func(p string) error { return rep.WriteFile(p, FormatJSON) }},
	} {
		p := filepath.Join(dir, c.name)
		if err := c.write(p); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 || fi.Size() == 0 {
			t.Errorf("%s: mode %v size %d, want 0644 and content", c.name, fi.Mode().Perm(), fi.Size())
		}
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("files left: %v", es)
	}
}

// TestMarkdownCellEscaping: a group name with a pipe or a line break must
// stay one cell of its Markdown row (and one line of the text table).
func TestMarkdownCellEscaping(t *testing.T) {
	all := append([]string(nil), summaryColumns[1:]...)
	p := writeRaw(t, trace.TableResults, map[string][]string{
		trace.ColRequestID: {"a", "b"}, trace.ColStatus: {"completed", "completed"}, trace.ColTenantID: {"x|y", "two\nlines"},
	}, all, 2)
	rep, err := Build([]string{p}, Options{By: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{FormatMarkdown, FormatTable} {
		var b bytes.Buffer
		if err := rep.Write(&b, f); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, "lines") && !strings.Contains(l, "two") {
				t.Errorf("%s: a line break split the cell: %q", f, l)
			}
			if f == FormatMarkdown && strings.HasPrefix(l, "| x") && !strings.HasPrefix(l, `| x\|y `) {
				t.Errorf("markdown: pipe not escaped: %q", l)
			}
		}
	}
}
