package measure

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestReadLifecycle(t *testing.T) {
	f, err := os.Open("testdata/inference_perf_stage.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadLifecycle("stage.json", f)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sent != 10 || s.Completed != 9 || s.Failed != 1 || s.TTFT.P50 != 0.0243 || s.TPOT.Mean != 0.0036 || s.E2E.P90 != 1.94 || s.RequestsPerSec != 4.99 || s.PromptLenMean != 591.6 || s.OutputLenMedian != 247 {
		t.Fatalf("%+v", s)
	}
	for in, want := range map[string]string{
		`{"load_summary": {}, "successes": {"count": 0}, "failures": {"count": 0}}`:                          "field load_summary.count: expected a count",
		`{"load_summary": {"count": 3}, "successes": {"count": 1}, "failures": {"count": 1}}`:                "expected successes + failures = 1 + 1, found 3",
		`{"load_summary": {"count": 1}, "successes": {"count": 1, "latency": {}}, "failures": {"count": 0}}`: "field successes.latency.time_to_first_token: expected mean, median, p90 and p99",
		`[1, 2]`: "expected inference-perf lifecycle metrics (JSON)",
	} {
		_, err := ReadLifecycle("s.json", strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "s.json") {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// The derived stage table round-trips, and every row prepares its facts.
func TestOpenLoopStages(t *testing.T) {
	b, err := os.ReadFile("testdata/inference_perf_h100.csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadOpenLoopStages("t.csv", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 24 {
		t.Fatalf("%d stage rows, want 24 (16 experiments, 8 of them in two stages)", len(rows))
	}
	var buf bytes.Buffer
	if err := WriteOpenLoopStages(&buf, []string{"c"}, rows); err != nil {
		t.Fatal(err)
	}
	again, err := ReadOpenLoopStages("t2.csv", &buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		a, b := rows[i], again[i]
		if a.Experiment != b.Experiment || a.Config != b.Config || a.Sent != b.Sent || a.TTFT.P50 != b.TTFT.P50 {
			t.Fatalf("row %d changed: %+v → %+v", i, a, b)
		}
	}
	bad := strings.Replace(string(b), ",3000,3000,0,", ",3000,2999,0,", 1)
	if _, err := ReadOpenLoopStages("bad.csv", strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "bad.csv:7: field sent: expected completed + failed = 2999 + 0, found 3000") {
		t.Fatalf("%v", err)
	}
}

func FuzzReadOpenLoopStages(f *testing.F) {
	seed(f, "inference_perf_h100.csv")
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ReadOpenLoopStages("f.csv", bytes.NewReader(b))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		for _, r := range rows {
			if r.Completed+r.Failed != r.Sent || r.TP <= 0 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

func FuzzReadLifecycle(f *testing.F) {
	seed(f, "inference_perf_stage.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadLifecycle("f.json", bytes.NewReader(b))
		if err == nil && s.Completed+s.Failed != s.Sent {
			t.Fatalf("accepted %+v", s)
		}
	})
}
