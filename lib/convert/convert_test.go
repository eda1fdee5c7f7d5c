package convert

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// dump renders a converted table as stable text: metadata (provenance
// without digests of stdin), then one line per row.
func dump(t *testing.T, data []byte) string {
	t.Helper()
	src, err := trace.Open("-", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var b strings.Builder
	md := src.Schema().Metadata()
	keys := append([]string(nil), md.Keys()...)
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := md.GetValue(k)
		fmt.Fprintf(&b, "# %s = %s\n", k, v)
	}
	rows, err := trace.ReadAllRequests(src)
	if err != nil {
		t.Fatal(err)
	}
	n := func(v int64) string {
		if v == trace.Null {
			return "null"
		}
		return fmt.Sprint(v)
	}
	for _, r := range rows {
		h := "-"
		if len(r.PrefixHashes) > 0 {
			h = fmt.Sprintf("%d[%d..%d]", len(r.PrefixHashes), r.PrefixHashes[0], r.PrefixHashes[len(r.PrefixHashes)-1])
		}
		fmt.Fprintf(&b, "%s arr=%s deps=%v delay=%d %s in=%d out=%d hashes=%s sess=%q tenant=%q model=%q step=%q loop=%d status=%q ttft=%s e2e=%s itl=%s row=%d",
			r.ID, n(r.ArrivalUS), r.DependsOn, r.DelayUS, r.Kind, r.InputTokens, r.OutputTokens, h, r.SessionID, r.TenantID, r.Model,
			r.StepID, r.LoopIteration, r.SourceStatus, n(r.RecordedTTFTUS), n(r.RecordedE2EUS), n(r.RecordedITLUS), r.SourceRow)
		if r.RequestType != "" || r.NumImages != 0 {
			fmt.Fprintf(&b, " type=%s images=%d", r.RequestType, r.NumImages)
		}
		if r.LoRA != "" {
			fmt.Fprintf(&b, " lora=%s", r.LoRA)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// convertFiles runs Convert from the testdata directory (so provenance paths
// are stable) and returns the Arrow stream.
func convertFiles(t *testing.T, o Options) ([]byte, *Stats, error) {
	t.Helper()
	var out bytes.Buffer
	o.Tool = "blis-convert"
	st, err := Convert(o, "-", bytes.NewReader(nil), &out)
	return out.Bytes(), st, err
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		o    Options
	}{
		{"azure2023", Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}}},
		{"azure2024", Options{Inputs: []string{"testdata/azure2024_code.csv"}}},
		{"azure2025", Options{Inputs: []string{"testdata/azure2025_multimodal.csv"}}},
		{"burstgpt_v1", Options{Inputs: []string{"testdata/burstgpt_v1.csv"}}},
		{"burstgpt_v2", Options{Inputs: []string{"testdata/burstgpt_v2.csv"}}},
		{"mooncake", Options{Inputs: []string{"testdata/mooncake.head5.jsonl"}}},
		{"mooncake_sessions", Options{Inputs: []string{"testdata/mooncake_sessions.handwritten.jsonl"}}},
		{"qwen_open", Options{Inputs: []string{"testdata/qwen_bailian.handwritten.jsonl"}}},
		{"qwen_closed", Options{Inputs: []string{"testdata/qwen_bailian.handwritten.jsonl"}, Sessions: "closed"}},
		{"weka_0187", Options{Inputs: []string{"testdata/weka_trace_0187.json"}}},
		{"weka_0277", Options{Inputs: []string{"testdata/weka_trace_0277.json"}}},
		{"weka_two_files", Options{Inputs: []string{"testdata/weka_trace_0187.json", "testdata/weka_trace_0277.json"}, SessionGap: 30_000_000}},
		{"vllm_bench", Options{Inputs: []string{"testdata/vllm_bench.handwritten.json"}}},
		{"inference_perf_v02", Options{Inputs: []string{"testdata/inference_perf_v02.handwritten.json"}}},
		{"inference_perf_usage", Options{Inputs: []string{"testdata/inference_perf_usage.handwritten.json"}}},
		{"llmservingsim", Options{Inputs: []string{"testdata/llmservingsim_rtx4090_llama8b.head8.jsonl"}}},
		{"vidur", Options{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}}},
		{"splitwise", Options{Inputs: []string{"testdata/splitwise_test_trace.csv"}}},
		{"otel_usage", Options{Inputs: []string{"testdata/otel_usage.handwritten.json"}}},
		{"otel_dag", Options{Inputs: []string{"testdata/otel_fanout.handwritten.json"}, Sessions: "closed"}},
		{"generic_csv", Options{Inputs: []string{"testdata/generic.handwritten.csv"}, Generic: Generic{TimeCol: "when_ms", TimeUnit: "ms", InputCol: "prompt", OutputCol: "completion", IDCol: "req", ModelCol: "model", TenantCol: "tenant"}}},
		{"generic_csv_lora", Options{Inputs: []string{"testdata/generic.handwritten.csv"}, Generic: Generic{TimeCol: "when_ms", TimeUnit: "ms", InputCol: "prompt", OutputCol: "completion", LoRACol: "tenant"}}},
		{"generic_jsonl", Options{Inputs: []string{"testdata/generic.handwritten.jsonl"}, Generic: Generic{TimeCol: "ts", TimeUnit: "iso", InputCol: "in", OutputCol: "out", IDCol: "id", SessionCol: "user"}}},
		{"window_speedup", Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}, Start: "100ms", End: "400ms", Speedup: 2}},
		{"limit_sample", Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}, Limit: 4, Sample: 0.5, Seed: 7}},
		{"filter_model", Options{Inputs: []string{"testdata/burstgpt_v2.csv"}, FilterModel: "GPT-4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, _, err := convertFiles(t, c.o)
			if err != nil {
				t.Fatal(err)
			}
			// Every converted table must pass validation.
			src, err := trace.Open("-", bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateTable(src); err != nil {
				t.Fatalf("converted table fails validation: %v", err)
			}
			got := dump(t, data)
			golden := filepath.Join("testdata", "golden", c.name+".txt")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (run go test -update to accept):\n%s", c.name, golden, got)
			}
			// Byte-identical output on a second run.
			again, _, _ := convertFiles(t, c.o)
			if !bytes.Equal(data, again) {
				t.Error("two conversions of the same input differ")
			}
		})
	}
}

func TestNotTraces(t *testing.T) {
	for _, f := range []string{"vidur_arxiv_stats.head5.csv", "servegen_trace.head4.csv", "otel_parallel_requests.json", "swe_agent.head.traj"} {
		_, _, err := convertFiles(t, Options{Inputs: []string{"testdata/" + f}})
		var nt *NotTraceError
		if !errors.As(err, &nt) {
			t.Errorf("%s: expected a NotTraceError, got %v", f, err)
			continue
		}
		t.Logf("%s: %v", f, err)
	}
}

func TestDetect(t *testing.T) {
	for f, want := range map[string]string{
		"azure2023_code.head12.csv":                 "azure",
		"azure2024_code.csv":                        "azure",
		"azure2025_multimodal.csv":                  "azure",
		"burstgpt_v1.csv":                           "burstgpt",
		"burstgpt_v2.csv":                           "burstgpt",
		"mooncake.head5.jsonl":                      "mooncake",
		"qwen_bailian.handwritten.jsonl":            "qwen",
		"weka_trace_0187.json":                      "weka",
		"vllm_bench.handwritten.json":               "vllm-bench",
		"inference_perf_v02.handwritten.json":       "inference-perf",
		"inference_perf_usage.handwritten.json":     "inference-perf",
		"llmservingsim_rtx4090_llama8b.head8.jsonl": "llmservingsim",
		"vidur_splitwise_conv.head10.csv":           "vidur",
		"splitwise_test_trace.csv":                  "splitwise",
		"otel_usage.handwritten.json":               "otel",
	} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(f, b, &Options{})
		if got != want || err != nil {
			t.Errorf("Detect(%s) = %q, %v; want %q", f, got, err, want)
		}
	}
}

// TestDetectUnreadable: compressed (other than gzip) and binary inputs get
// a short message saying what they are, not a dump of their bytes.
func TestDetectUnreadable(t *testing.T) {
	long := "TIMESTAMP," + strings.Repeat("x", 500) + "\n1,2\n"
	for _, c := range []struct {
		name, head, want string
	}{
		{"zstd", "\x28\xb5\x2f\xfdrest", "t: zstd-compressed input: decompress it first (only gzip is read directly)"},
		{"bzip2", "BZh91AY&SY", "t: bzip2-compressed input"},
		{"xz", "\xfd7zXZ\x00\x00", "t: xz-compressed input"},
		{"zip", "PK\x03\x04rest", "t: zip-compressed input"},
		{"binary", "\x0e`\x05(\xc8\xaa$Q\x9e\x98\x00\x01,\x02\n", "t: unrecognised input: binary data, neither a CSV header nor JSON"},
		{"long header", long, "t: unrecognised CSV header \"TIMESTAMP,xxx"},
	} {
		_, err := Detect("t", []byte(c.head), &Options{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || len(err.Error()) > 400 {
			t.Errorf("%s: %v; want a short error starting %q", c.name, err, c.want)
		}
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadRows(t *testing.T) {
	const hdr = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	cases := []struct {
		name, format, content string
		want                  string // substring after the file name
	}{
		{"bad time", "azure", hdr + "2023-11-16 18:17:03.9799600,10,1\n2023-13-16 18:17:03,10,1\n", ":3: TIMESTAMP: expected a timestamp like 2023-11-16 18:17:03.9799600, found \"2023-13-16 18:17:03\""},
		{"bad tokens", "azure", hdr + "2023-11-16 18:17:03.9799600,ten,1\n", ":2: ContextTokens: expected a token count (integer >= 0), found \"ten\""},
		{"negative", "azure", hdr + "2023-11-16 18:17:03.9799600,10,-1\n", ":2: GeneratedTokens: expected a token count (integer >= 0), found \"-1\""},
		{"short row", "azure", hdr + "2023-11-16 18:17:03.9799600,10\n", ":2: row: expected 3 fields, found 2 fields"},
		{"zero input", "azure", hdr + "2023-11-16 18:17:03.9799600,0,5\n", ":2: input_tokens: expected > 0 for an llm request, found 0"},
		{"missing column", "azure", "TIMESTAMP,ContextTokens\n", ":1: header: expected a column named GeneratedTokens"},
		{"bad images", "azure", "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2024-10-15T12:00:00.269Z,two,770,491\n", ":2: NumImages: expected an image count (integer >= 0), found \"two\""},
		{"json type", "mooncake", `{"timestamp": 0, "input_length": "x", "output_length": 1}` + "\n", ":1: input_length: expected a JSON number"},
		{"json syntax", "mooncake", `{"timestamp": 0, "input_length": 5,` + "\n", ":1: line: expected one JSON object per line"},
		{"json missing", "mooncake", `{"timestamp": 0, "output_length": 1}` + "\n", ":1: input_length: expected a token count, found nothing"},
		{"burst time", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\nabc,ChatGPT,1,2,3,x\n", ":2: Timestamp: expected seconds, found \"abc\""},
		{"duplicate id", "splitwise", "request_id,arrival_timestamp,prompt_size,token_size\n7,1,10,1\n7,2,10,1\n", ":3: request_id: expected a unique id, found \"in.txt:7\" again (first at row 2)"},
		{"empty id", "splitwise", "request_id,arrival_timestamp,prompt_size,token_size\n,1,10,1\n", ":2: request_id: expected a request id, found \"\""},
		{"time span overflows", "vidur", "arrived_at,num_prefill_tokens,num_decode_tokens\n-9000000000000,1,1\n9000000000000,2,2\n", ":3: arrival_us: expected a time less than 2^63 µs after the first request, found 18000000000000000000 µs after it"},
		{"weka truncated", "weka", `{"id":"c","block_size":64,"requests":[{"t":0,`, ": document: expected a complete JSON document, found unexpected EOF"},
		{"weka syntax", "weka", `{"id":"c","block_size":64,"requests":[{"t":0,}]}`, ": document: expected a complete JSON document, found invalid character '}' looking for beginning of object key string at byte 46"},
		{"weka type", "weka", `{"id":"c","block_size":64,"requests":[{"t":"0","type":"n","in":4,"out":1}]}`, ": requests.t: expected a JSON number, found a JSON string"},
		{"weka without requests", "weka", `{"timestamp": 0, "input_length": 5, "output_length": 1}` + "\n", ": requests: expected an array of calls, found nothing"},
		{"weka trailing data", "weka", `{"id":"c","requests":[]}` + "\n" + `{"b":2}` + "\n", ": document: expected one JSON document, found more data after it at byte 26"},
		{"otel without spans", "otel", `{"a":1}`, ": spans: expected an array of spans, found nothing"},
		{"vllm-bench without input_lens", "vllm-bench", `{"timestamp": 0, "input_length": 5, "output_length": 1}`, ": input_lens: expected an array of prompt lengths, found nothing"},
		{"inference-perf end before start", "inference-perf", `[{"start_time": 5, "end_time": 4, "info": {"input_tokens": 3, "output_tokens": 1}}]`, ": [0].end_time: expected seconds, not before start_time, found \"4\""},
		{"inference-perf without info", "inference-perf", `[{"start_time": 5, "end_time": 6}]`, ": [0].info: expected the request's token counts and times, found nothing"},
		{"inference-perf bad body", "inference-perf", `[{"start_time": 5, "end_time": 6, "request": "{", "info": {"input_tokens": 3, "output_tokens": 1}}]`, ": [0].request: expected the request body as JSON text, found unexpected end of JSON input"},
		{"multi-line field", "burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,\"Chat\nGPT\",472,18,490,x\n", ":2: row: expected a CSV line, found an unterminated quoted field (a field may not span lines)"},
		{"weka tokens", "weka", `{"id":"c","block_size":64,"requests":[{"t":0,"type":"n","in":-4,"out":1}]}`, ": requests[0].in: expected a token count, found \"-4\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, "in.txt", c.content)
			_, _, err := convertFiles(t, Options{Format: c.format, Inputs: []string{p}})
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.HasPrefix(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant %s%s", err, p, c.want)
			}
		})
	}
}

func TestSkipBad(t *testing.T) {
	p := writeTemp(t, "in.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"+
		"2023-11-16 18:17:03.9799600,10,1\nbad,10,1\n2023-11-16 18:17:04,x,1\n2023-11-16 18:17:05,y,1\n2023-11-16 18:17:06,10,2\n")
	data, st, err := convertFiles(t, Options{Inputs: []string{p}, SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != 2 || st.SkippedTotal() != 3 {
		t.Fatalf("written %d skipped %d, want 2 and 3", st.Written, st.SkippedTotal())
	}
	var b bytes.Buffer
	st.Report("blis-convert", &b)
	want := "blis-convert: skipped 3 bad row(s):\n         2  ContextTokens: expected a token count (integer >= 0)\n         1  TIMESTAMP: expected a timestamp like 2023-11-16 18:17:03.9799600\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	if !strings.Contains(dump(t, data), "arr=2020040") {
		t.Error("last row should arrive 2.02004 s after the first")
	}
}

func TestOutOfOrder(t *testing.T) {
	p := writeTemp(t, "in.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n5,1,1\n1,2,2\n3,3,3\n")
	data, st, err := convertFiles(t, Options{Inputs: []string{p}})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Reordered {
		t.Error("expected Reordered")
	}
	d := dump(t, data)
	if !strings.Contains(d, "in.csv:3 arr=0 ") || !strings.Contains(d, "in.csv:4 arr=2000000 ") || !strings.Contains(d, "in.csv:2 arr=4000000 ") {
		t.Errorf("not sorted by arrival:\n%s", d)
	}
}

func TestOutOfOrderBeyondWindow(t *testing.T) {
	var b strings.Builder
	b.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
	for i := 0; i < window+10; i++ {
		fmt.Fprintf(&b, "%d,1,1\n", i+10)
	}
	b.WriteString("0,1,1\n")
	p := writeTemp(t, "in.csv", b.String())
	_, _, err := convertFiles(t, Options{Inputs: []string{p}})
	if err == nil || !strings.Contains(err.Error(), "--sort") {
		t.Fatalf("expected a --sort hint, got %v", err)
	}
	if _, st, err := convertFiles(t, Options{Inputs: []string{p}, Sort: true}); err != nil || st.Written != window+11 {
		t.Fatalf("--sort: %v, %d rows", err, st.Written)
	}
}

func TestOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Start: "2024-01-01T00:00:00Z"},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, End: "soon"},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Sample: 2},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Format: "nope"},
		{Inputs: []string{"testdata/azure2024_code.csv", "testdata/azure2023_code.head12.csv"}},
		{Inputs: []string{"testdata/generic.handwritten.csv"}, Format: "csv"},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Speedup: math.NaN()},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Speedup: math.Inf(1)},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Sample: math.NaN()},
		// Arrival times divided by a tiny factor overflow int64 µs.
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Speedup: 1e-300},
		// An empty window is a mistake, not an empty table.
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Start: "30m", End: "10m"},
		{Inputs: []string{"testdata/azure2023_code.head12.csv"}, Start: "2023-11-16T18:17:05Z", End: "1s"},
		{Inputs: []string{"testdata/vidur_splitwise_conv.head10.csv"}, Start: "-5m"},
		{Inputs: []string{"testdata/weka_trace_0187.json", "testdata/weka_trace_0277.json"}, SessionGap: -30_000_000},
	} {
		_, _, err := convertFiles(t, o)
		if !badinput.Is(err) {
			t.Errorf("%+v: expected a usage error, got %v", o, err)
		}
	}
}

func TestAbsoluteWindow(t *testing.T) {
	data, _, err := convertFiles(t, Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}, Start: "2023-11-16T18:17:04.1Z", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	d := dump(t, data)
	if !strings.Contains(d, "blis.start_time = 2023-11-16T18:17:04.120644Z") || strings.Count(d, " arr=") != 2 {
		t.Errorf("unexpected window:\n%s", d)
	}
}

func TestReencodeAndCount(t *testing.T) {
	data, _, err := convertFiles(t, Options{Inputs: []string{"testdata/weka_trace_0277.json"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, out := range []string{"t.arrow", "t.stream"} {
		p := filepath.Join(dir, out)
		if _, err := Convert(Options{Inputs: []string{"-"}}, p, bytes.NewReader(data), nil); err != nil {
			t.Fatal(err)
		}
		n, _, err := Count(Options{Inputs: []string{p}}, nil)
		if err != nil || n != 53 {
			t.Fatalf("%s: count %d, %v", out, n, err)
		}
		var back bytes.Buffer
		if _, err := Convert(Options{Inputs: []string{p}, Format: "arrow"}, "-", nil, &back); err != nil {
			t.Fatal(err)
		}
		a, b := dump(t, data), dump(t, back.Bytes())
		// Rows are identical; only provenance grows.
		if rowsOf(a) != rowsOf(b) {
			t.Errorf("%s: rows changed in a round trip", out)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func rowsOf(d string) string {
	var b strings.Builder
	for _, l := range strings.Split(d, "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestFailedOutputLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := writeTemp(t, "in.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n1,1,1\n2,x,1\n")
	out := filepath.Join(dir, "out.arrow")
	if _, err := Convert(Options{Inputs: []string{p}}, out, nil, nil); err == nil {
		t.Fatal("expected an error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed conversion left %v", entries)
	}
}

// TestSharedDataTraces converts every request trace under ../shared/data
// (or $BLIS_SHARED_DATA) and checks that the files that are not traces say
// so. Without the data it skips, and make test says so
// (scripts/shared-data-tests.sh); BLIS_REQUIRE_SHARED=1 (CI) fails instead.
func TestSharedDataTraces(t *testing.T) {
	root := os.Getenv("BLIS_SHARED_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared", "data")
	}
	if _, err := os.Stat(root); err != nil {
		if os.Getenv("BLIS_REQUIRE_SHARED") == "1" {
			t.Fatalf("BLIS_REQUIRE_SHARED=1 and no shared data at %s: %v", root, err)
		}
		t.Skipf("shared data not present at %s: %v", root, err)
	}
	var files []string
	filepath.Walk(filepath.Join(root, "traces"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	ss, _ := filepath.Glob(filepath.Join(root, "measurements", "llmservingsim", "*", "*", "vllm", "requests.jsonl"))
	files = append(files, ss...)
	converted := 0
	for _, f := range files {
		var out bytes.Buffer
		st, err := Convert(Options{Inputs: []string{f}}, "-", nil, &out)
		var nt *NotTraceError
		if errors.As(err, &nt) {
			t.Logf("not a trace: %v", err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		src, err := trace.Open("-", &out)
		if err != nil {
			t.Fatal(err)
		}
		n, err := ValidateTable(src)
		if err != nil || n != st.Written || n == 0 {
			t.Errorf("%s: validation: %d rows (wrote %d): %v", f, n, st.Written, err)
		}
		if strings.HasSuffix(f, "AzureLLMInferenceTrace_code.csv") && n != 8819 {
			t.Errorf("%s: %d rows, want 8819", f, n)
		}
		converted++
	}
	if converted < 12 {
		t.Errorf("only %d shared traces converted", converted)
	}
}

func TestReencodeWindowKeepsOrigin(t *testing.T) {
	data, _, err := convertFiles(t, Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Convert(Options{Inputs: []string{"-"}, Start: "2023-11-16T18:17:04.1Z", Speedup: 2}, "-", bytes.NewReader(data), &out); err != nil {
		t.Fatal(err)
	}
	d := dump(t, out.Bytes())
	for _, want := range []string{"blis.start_time = 2023-11-16T18:17:04.120644Z", "blis.time_scale = 2", "head12.csv:5 arr=0 ", "head12.csv:6 arr=152155 "} {
		if !strings.Contains(d, want) {
			t.Errorf("missing %q in\n%s", want, d)
		}
	}
}

func TestTruncatedStreamOnError(t *testing.T) {
	// A bad row after output began must not leave a stream that reads as complete.
	var b strings.Builder
	b.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
	for i := 0; i < 3*window; i++ {
		fmt.Fprintf(&b, "%d,1,1\n", i)
	}
	b.WriteString("x,1,1\n")
	p := writeTemp(t, "in.csv", b.String())
	data, _, err := convertFiles(t, Options{Inputs: []string{p}})
	if err == nil {
		t.Fatal("expected an error")
	}
	if n, _, err := Count(Options{Inputs: []string{"-"}}, bytes.NewReader(data)); err == nil {
		t.Fatalf("partial output read as a complete table of %d rows", n)
	}
	// A truncated table is bad input (exit 2), whether counted or re-encoded.
	for _, opts := range []Options{{Inputs: []string{"-"}}, {Inputs: []string{"-"}, Format: "arrow"}} {
		_, _, cerr := Count(opts, bytes.NewReader(data))
		_, rerr := Convert(opts, "-", bytes.NewReader(data), io.Discard)
		for _, err := range []error{cerr, rerr} {
			if !badinput.Is(err) || !strings.Contains(err.Error(), "end-of-stream marker") {
				t.Errorf("%+v: %T %v, want a bad-input error about the missing end-of-stream marker", opts, err, err)
			}
		}
	}
}

// ReadRequests gives the rows Convert writes, in memory, for a trace and for
// a requests table.
func TestReadRequests(t *testing.T) {
	reqs, err := ReadRequests("testdata/llmservingsim_rtx4090_llama8b.head8.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 8 || reqs[0].ArrivalUS != 0 || reqs[0].RecordedTTFTUS <= 0 {
		t.Fatalf("%d rows, first %+v", len(reqs), reqs[0])
	}
	out := filepath.Join(t.TempDir(), "r.arrow")
	if _, err := Convert(Options{Inputs: []string{"testdata/llmservingsim_rtx4090_llama8b.head8.jsonl"}}, out, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRequests(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(reqs) {
		t.Fatalf("table: %d rows, trace: %d", len(back), len(reqs))
	}
	for i := range back {
		if back[i].ID != reqs[i].ID || back[i].ArrivalUS != reqs[i].ArrivalUS || back[i].RecordedE2EUS != reqs[i].RecordedE2EUS {
			t.Fatalf("row %d: table %+v, trace %+v", i, back[i], reqs[i])
		}
	}
	if _, err := ReadRequests("testdata/nope.jsonl", ""); err == nil {
		t.Error("a missing file gave no error")
	}
}

// Validation holds a table to its blis.prefix_unique promise.
func TestValidatePrefixUnique(t *testing.T) {
	table := func(promise string, firsts ...uint64) []byte {
		md := trace.NewMeta()
		if promise != "" {
			md.Set(trace.MetaPrefixUnique, promise)
		}
		s := trace.RequestsSchema(md)
		var buf bytes.Buffer
		sink, err := trace.Create("-", &buf, s)
		if err != nil {
			t.Fatal(err)
		}
		w := trace.NewRequestWriter(sink, s)
		for i, h := range firsts {
			r := trace.NewRequest(fmt.Sprint("r", i))
			r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), 40, 5
			r.PrefixHashes = []uint64{h, h + 1}
			if err := w.Write(&r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, tc := range []struct {
		promise string
		firsts  []uint64
		want    string // in the error; "" = valid
	}{
		{"true", []uint64{1, 2, 3}, ""},
		{"", []uint64{1, 2, 1}, ""},
		{"true", []uint64{1, 2, 1}, "row 3 (request r2): column prefix_hashes: expected a first entry no other row has (the table promises blis.prefix_unique=true), found 1, as request r0"},
		{"yes", []uint64{1}, "schema metadata blis.prefix_unique: expected true (or no key), found \"yes\""},
	} {
		src, err := trace.Open("-", bytes.NewReader(table(tc.promise, tc.firsts...)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = ValidateTable(src)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !badinput.Is(err)) {
			t.Errorf("promise %q, first hashes %v: %v, want %q", tc.promise, tc.firsts, err, tc.want)
		}
	}
}
