package fitted

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// A fitted model's ramp is its StepTime on decode-only batches: every
// shipped coefficient file, and a model over every feature.
func TestDecodeRampMatchesStepTime(t *testing.T) {
	var models []*Model
	root := filepath.Join("..", "..", "..", "coefficients")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		c, err := Load(p)
		if err != nil {
			return err
		}
		a, err := roofline.LoadModel(c.Model)
		if err != nil {
			return err
		}
		g, err := roofline.LoadGPU(c.GPU)
		if err != nil {
			return err
		}
		rf, err := roofline.New(a, g, c.TP)
		if err != nil {
			return err
		}
		m, err := NewModel(c, rf, p)
		if err != nil {
			return err
		}
		models = append(models, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(models) < 5 {
		t.Fatalf("only %d coefficient files found under %s", len(models), root)
	}
	all := sample()
	all.Terms = nil
	for i, d := range FeatureDoc {
		all.Terms = append(all.Terms, Term{d.Name, float64(i%4) + 0.37})
	}
	a, _ := roofline.LoadModel("qwen3-32b")
	g, _ := roofline.LookupGPU("h100")
	rf, err := roofline.New(a, g, 2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(all, rf, "all")
	if err != nil {
		t.Fatal(err)
	}
	models = append(models, m)
	for _, m := range models {
		for _, seqs := range []int{1, 2, 17, 256} {
			f := m.DecodeRamp(seqs)
			if f == nil {
				t.Fatalf("%s: no ramp", m.Name())
			}
			prev := int64(0)
			for ctx := int64(0); ctx < 2_000_000; ctx += 7919 {
				got, want := f(ctx), m.StepTime(&latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx})
				if got != want || got < prev {
					t.Fatalf("%s, %d seqs, ctx %d: ramp %d, StepTime %d (previous %d)", m.Name(), seqs, ctx, got, want, prev)
				}
				prev = got
			}
		}
	}
	// A negative coefficient on a context feature could make the step
	// shorter as the context grows: stepped, not leapt.
	neg := sample()
	neg.Terms = []Term{{Const, 5000}, {DecodeCtx, -0.01}}
	nm, err := NewModel(neg, nil, "negative")
	if err != nil {
		t.Fatal(err)
	}
	if nm.DecodeRamp(4) != nil {
		t.Error("a ramp for a model whose step falls with the context")
	}
}
