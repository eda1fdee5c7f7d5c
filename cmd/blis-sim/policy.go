package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/blis-sim/blis/lib/cliutil"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy/bundle"
	"github.com/urfave/cli/v2"
)

// loadPolicy loads the bundle named by --policy or the cluster YAML's
// policy key (relative to the cluster file), before anything is simulated.
func loadPolicy(c *cli.Context, cfg *config.Cluster) (*bundle.Bundle, error) {
	p := c.String("policy")
	if p == "" && cfg.Policy != "" {
		p = cfg.Policy
		if !filepath.IsAbs(p) && cfg.Name != "" {
			p = filepath.Join(filepath.Dir(cfg.Name), p)
		}
	}
	if p == "" {
		return nil, nil
	}
	b, err := bundle.Load(p, bundle.Env{})
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
