package bundle_test

import (
	"os"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/bundle"
)

// TestDocsListEverything: docs/policies.md names every view field and
// every template.
func TestDocsListEverything(t *testing.T) {
	b, err := os.ReadFile("../../../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range bundle.Fields() {
		if !strings.Contains(doc, "| `"+f.Name+"` | "+f.Type+" |") {
			t.Errorf("docs/policies.md: no row for %s field %s", f.View, f.Name)
		}
	}
	for _, tp := range bundle.Templates() {
		if !strings.Contains(doc, "`"+tp.Name+"`") {
			t.Errorf("docs/policies.md: template %s %s not documented", tp.Stage, tp.Name)
		}
		for _, p := range tp.Params {
			if !strings.Contains(doc, p.Name) {
				t.Errorf("docs/policies.md: parameter %s of %s not documented", p.Name, tp.Name)
			}
		}
	}
}
