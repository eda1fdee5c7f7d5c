package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/blis-sim/blis/lib/engine/bundle"
)

func listPolicies(w io.Writer) {
	stage := ""
	for _, t := range bundle.Templates() {
		if string(t.Stage) != stage {
			stage = string(t.Stage)
			fmt.Fprintf(w, "%s:\n", stage)
		}
		fmt.Fprintf(w, "  %s: %s\n", t.Name, t.Doc)
		for _, p := range t.Params {
			def := fmt.Sprintf("%g", p.Default)
			fmt.Fprintf(w, "      %s: %s (default %s): %s\n", p.Name, p.Range(), def, p.Doc)
		}
	}
	fmt.Fprintf(w, "\nkinds: parameterized | decision_tree | starlark (see docs/policies.md)\n")
	fmt.Fprintf(w, "stages: %s\n", strings.Join(bundle.StageNames, ", "))
}
