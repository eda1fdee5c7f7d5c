package report

import (
	"strings"
	"testing"
)

// TestNoMatchNotes: an --slo class or a --by key that matches no row is a
// note (issue 10, item 5: --slo interactive:ttft=200ms on a table without
// that class measured nothing and said nothing).
func TestNoMatchNotes(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
		want []string
	}{
		{"class absent", Options{SLOs: mustSLOs(t, "nosuch:ttft=200ms")}, []string{
			"testdata/small.results.arrows: --slo nosuch:...: no row has slo_class nosuch (its classes are ",
			"testdata/small.results.arrows: --slo: no llm row is under any of the SLOs given: the SLO table measures nothing",
		}},
		{"one class absent", Options{SLOs: mustSLOs(t, "nosuch:ttft=200ms", "ttft=1s")}, []string{
			"--slo nosuch:...: no row has slo_class nosuch",
		}},
		{"by a null column", Options{By: "model"}, []string{
			"testdata/small.results.arrows: --by model: column model is null in every row: all rows are in the group (none)",
		}},
		{"all match", Options{SLOs: mustSLOs(t, "ttft=200ms"), By: "tenant"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Build([]string{smallResults}, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(rep.Notes, "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("notes lack %q:\n%s", w, got)
				}
			}
			if c.want == nil && got != "" {
				t.Errorf("unexpected notes:\n%s", got)
			}
			if c.name == "one class absent" && strings.Contains(got, "no llm row") {
				t.Errorf("the global SLO measures rows:\n%s", got)
			}
		})
	}
}

// TestOracleNote: a run whose policy bundle read the true output lengths
// says so in the config table (router "… (oracle)") and in a note.
func TestOracleNote(t *testing.T) {
	path := t.TempDir() + "/oracle.results.arrows"
	md := simMeta("roofline:qwen3-32b/h100/tp2")
	md.Set("blis.policy.id", "sjf-cheat")
	md.Set("blis.policy.oracle", "true")
	writeResultsMeta(t, path, smallRows(), md)
	rep, err := Build([]string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.Notes, "\n"); !strings.Contains(got, `ORACLE: policy bundle "sjf-cheat" read the true output lengths`) {
		t.Fatalf("notes: %s", got)
	}
	var b strings.Builder
	if err := rep.Write(&b, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "least-loaded (oracle)") {
		t.Fatalf("config table lacks the oracle mark:\n%s", b.String())
	}
}
