package fit

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	for _, tp := range []int{2, 4, 8} {
	for _, set := range []string{"roofline", "roofline-scale", "tokens", "plain"} {
	f, _ := os.Open("/work/shared/data/measurements/aiconfigurator/silicon_sample.csv")
	pts, _, err := ReadServingPoints("s.csv", f, ServingFilter{Model: "Qwen/Qwen3-32B", GPU: "h100", Engine: "vllm", TP: tp, Precision: "native"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSetup(Deployment{Model: "Qwen/Qwen3-32B", GPU: "h100", TP: tp, Engine: "vllm", Version: "0.12.0"})
	if err != nil {
		t.Fatal(err)
	}
	tr, te := Split(len(pts), 0.2, 42, "holdout")
	var trp, tep []ServingPoint
	for _, i := range tr { trp = append(trp, pts[i]) }
	for _, i := range te { tep = append(tep, pts[i]) }
	names, _ := FeatureNames(set, tp)
	in, out := MaxLengths(pts)
	t0 := time.Now()
	job := &SimFitJob{Setup: s, Names: names, Train: s.ServingTargets(trp), Test: s.ServingTargets(tep), MaxIn: in, MaxOut: out,
		Options: SimFitOptions{MaxEvals: 300, FitAlpha: true, Workers: 2}, Method: "nelder-mead-sim"}
	res, err := job.Run()
	if err != nil { t.Fatal(err) }
	fmt.Println(tp, set, time.Since(t0), res.Coeffs.Notes, res.Fit.Values, res.Fit.Alpha.QueueBase)
	}
	}
}
