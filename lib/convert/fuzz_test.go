package convert

import (
	"bytes"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzFormat feeds arbitrary bytes to one parser through the whole
// conversion: it may fail, but it must not panic, and a success must be a
// valid table.
func fuzzFormat(f *testing.F, format string, seeds []string, o Options) {
	for _, s := range seeds {
		b, err := os.ReadFile("testdata/" + s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := o
		opts.Format, opts.Inputs = format, []string{"-"}
		var out bytes.Buffer
		st, err := Convert(opts, "-", bytes.NewReader(data), &out)
		if err != nil {
			return
		}
		n, _, err := Count(Options{Inputs: []string{"-"}}, &out)
		if err != nil || n != st.Written {
			t.Fatalf("converted table does not validate: %d rows of %d: %v", n, st.Written, err)
		}
	})
}

func FuzzAzure(f *testing.F) {
	fuzzFormat(f, "azure", []string{"azure2023_code.head12.csv", "azure2024_code.csv", "azure2025_multimodal.csv"}, Options{})
}
func FuzzBurstGPT(f *testing.F) {
	fuzzFormat(f, "burstgpt", []string{"burstgpt_v1.csv", "burstgpt_v2.csv"}, Options{})
}
func FuzzMooncake(f *testing.F) {
	fuzzFormat(f, "mooncake", []string{"mooncake.head5.jsonl", "mooncake_sessions.handwritten.jsonl"}, Options{})
}
func FuzzQwen(f *testing.F) {
	fuzzFormat(f, "qwen", []string{"qwen_bailian.handwritten.jsonl"}, Options{Sessions: "closed"})
}
func FuzzWeka(f *testing.F) {
	fuzzFormat(f, "weka", []string{"weka_trace_0187.json"}, Options{})
}
func FuzzVLLMBench(f *testing.F) {
	fuzzFormat(f, "vllm-bench", []string{"vllm_bench.handwritten.json"}, Options{})
}
func FuzzInferencePerf(f *testing.F) {
	fuzzFormat(f, "inference-perf", []string{"inference_perf_v02.handwritten.json", "inference_perf_usage.handwritten.json"}, Options{})
}
func FuzzLLMServingSim(f *testing.F) {
	fuzzFormat(f, "llmservingsim", []string{"llmservingsim_rtx4090_llama8b.head8.jsonl"}, Options{})
}
func FuzzVidur(f *testing.F) {
	fuzzFormat(f, "vidur", []string{"vidur_splitwise_conv.head10.csv"}, Options{})
}
func FuzzSplitwise(f *testing.F) {
	fuzzFormat(f, "splitwise", []string{"splitwise_test_trace.csv"}, Options{})
}
func FuzzOTel(f *testing.F) {
	fuzzFormat(f, "otel", []string{"otel_usage.handwritten.json", "otel_fanout.handwritten.json"}, Options{Sessions: "closed"})
}
func FuzzGenericCSV(f *testing.F) {
	fuzzFormat(f, "csv", []string{"generic.handwritten.csv"}, Options{Generic: Generic{TimeCol: "when_ms", TimeUnit: "ms", InputCol: "prompt", OutputCol: "completion", IDCol: "req", ModelCol: "model"}})
}
func FuzzGenericJSONL(f *testing.F) {
	fuzzFormat(f, "jsonl", []string{"generic.handwritten.jsonl"}, Options{Generic: Generic{TimeCol: "ts", TimeUnit: "iso", InputCol: "in", OutputCol: "out", IDCol: "id", SessionCol: "user"}})
}

// FuzzDetect: detection never panics and names a known format or fails.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{"azure2023_code.head12.csv", "weka_trace_0187.json", "mooncake.head5.jsonl", "servegen_trace.head4.csv", "swe_agent.head.traj"} {
		b, _ := os.ReadFile("testdata/" + s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Detect("x", data, &Options{})
		if err == nil && got != "arrow" {
			if _, ok := parsers[got]; !ok {
				t.Fatalf("Detect returned unknown format %q", got)
			}
		}
	})
}

// FuzzTimestamp checks the hand-rolled parser against time.Parse.
func FuzzTimestamp(f *testing.F) {
	for _, s := range []string{"2023-11-16 18:17:03.9799600", "2024-05-10 00:00:00.009930+00:00", "2024-05-10 00:00:00+00:00",
		"2024-10-15T12:00:00.269Z", "2024-02-29T23:59:59-05:30", "1999-12-31 23:59:59.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseTimestamp([]byte(s))
		if !ok {
			return
		}
		norm := strings.TrimSpace(s)
		norm = norm[:10] + "T" + norm[11:]
		if !strings.HasSuffix(norm, "Z") && !strings.ContainsAny(norm[19:], "+-") {
			norm += "Z"
		}
		want, err := time.Parse(time.RFC3339Nano, norm)
		if err != nil || want.Year() < 1970 || want.Year() > 2200 {
			return // Go is stricter (leap seconds, "+0530" offsets); ranges beyond UnixNano
		}
		if want.UnixMicro() != got {
			t.Fatalf("parseTimestamp(%q) = %d, time.Parse gives %d", s, got, want.UnixMicro())
		}
	})
}

// FuzzParseScaled checks decimal parsing against strconv.ParseFloat.
func FuzzParseScaled(f *testing.F) {
	for _, s := range []string{"4.314579", "19440110.0", "0.0000005", "-3.5", "1e3", "12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseScaled([]byte(s), 1_000_000)
		if !ok {
			return
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.Abs(x) > 1e12 {
			return
		}
		if d := math.Abs(float64(got) - x*1e6); d > 1+math.Abs(x)*1e-9 {
			t.Fatalf("parseScaled(%q) = %d, want %.3f", s, got, x*1e6)
		}
	})
}

var _ = io.EOF
