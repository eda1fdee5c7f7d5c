package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/urfave/cli/v2"
)

// loadPolicy loads the bundle named by --policy or the cluster YAML's
// policy key (relative to the cluster file), before anything is simulated.
func loadPolicy(c *cli.Context, cfg *config.Cluster) (*bundle.Bundle, error) {
	var b *bundle.Bundle
	var err error
	if p := c.String("policy"); p != "" {
		b, err = bundle.Load(p, bundle.Env{})
	} else {
		b, err = bundle.FromConfig(cfg, bundle.Env{})
	}
	if err != nil {
		return nil, cliutil.BadInput(err)
	}
	return b, nil
}

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
