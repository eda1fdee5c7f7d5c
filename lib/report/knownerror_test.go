package report

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestKnownErrorsMatchDocs: KnownErrors is the pooled table of
// docs/latency.md, row for row. After make fidelity, paste the table this
// test prints.
func TestKnownErrorsMatchDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/latency.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const head = "#### Pooled: median absolute error (median signed error) by latency model, GPU family and load regime"
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatalf("docs/latency.md has no %q section: update KnownErrorSource", head)
	}
	row := regexp.MustCompile(`^\| (\w+) \| (\w+) \| ([^|]+) \| (\d+) \| (\d+)% \(([+-]?\d+)%\) \| (\d+)% \(([+-]?\d+)%\) \|(?: [^|]+ \|)?$`)
	var want []KnownError
	for _, l := range strings.Split(doc[i:], "\n")[1:] {
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "<!--") {
			break
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n := func(s string) int { v, _ := strconv.Atoi(s); return v }
		want = append(want, KnownError{m[1], m[2], strings.TrimSpace(m[3]), n(m[4]), n(m[5]), n(m[6]), n(m[7]), n(m[8])})
	}
	if len(want) == 0 {
		t.Fatal("no rows found under the pooled table's heading")
	}
	if fmt.Sprint(want) != fmt.Sprint(KnownErrors) {
		var g strings.Builder
		for _, k := range want {
			fmt.Fprintf(&g, "\t{%q, %q, %q, %d, %d, %d, %d, %d},\n", k.Latency, k.GPUFamily, k.Regime, k.Points, k.TTFT, k.TTFTBias, k.TPOT, k.TPOTBias)
		}
		t.Fatalf("KnownErrors differs from docs/latency.md; the table there is:\n%s", g.String())
	}
}

func TestKnownErrorsFor(t *testing.T) {
	if got := KnownErrorsFor("roofline:llama-3.1-8b/h100/tp1", "h100"); len(got) != 5 || got[0].Regime != "closed loop, C 8–32" || got[0].TTFT != 17 || got[3].Regime != "open loop, below overload" {
		t.Errorf("roofline on h100: %+v", got)
	}
	if got := KnownErrorsFor("fitted:coefficients/qwen3-32b/h100-tp2-vllm-0.12.0.yaml", "h200"); len(got) != 3 || got[2].TPOT != 23 {
		t.Errorf("fitted on h200: %+v", got)
	}
	if got := KnownErrorsFor("linear", "h100"); got != nil {
		t.Errorf("linear: %+v", got)
	}
	if got := KnownErrorsFor("roofline:x/a100-80gb/tp1", "a100-80gb"); got != nil {
		t.Errorf("nothing was measured on Ampere: %+v", got)
	}
}
