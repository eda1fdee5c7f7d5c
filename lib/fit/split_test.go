package fit

import (
	"errors"
	"github.com/blis-sim/blis/lib/measure"
	"strings"
	"testing"
)

func TestSplitDeterministic(t *testing.T) {
	tr1, te1 := Split(90, 0.2, 42, "holdout")
	tr2, te2 := Split(90, 0.2, 42, "holdout")
	if len(te1) != 18 || len(tr1) != 72 {
		t.Fatalf("sizes %d/%d", len(tr1), len(te1))
	}
	for i := range te1 {
		if te1[i] != te2[i] {
			t.Fatal("split not deterministic")
		}
	}
	_ = tr2
	_, te3 := Split(90, 0.2, 43, "holdout")
	same := true
	for i := range te1 {
		same = same && te1[i] == te3[i]
	}
	if same {
		t.Error("another seed gave the same split")
	}
	folds, err := Folds(10, 3, 1, "kfold")
	if err != nil || len(folds) != 3 || len(folds[0])+len(folds[1])+len(folds[2]) != 10 {
		t.Fatalf("folds %v %v", folds, err)
	}
	if _, err := Folds(2, 3, 1, "kfold"); err == nil {
		t.Error("want an error for k > n")
	}
}

func TestTooFew(t *testing.T) {
	s := []measure.StepSample{{US: 1}, {US: 2}}
	_, err := FitSteps(s, TokenFeatures)
	var tf *TooFewError
	if !errors.As(err, &tf) || tf.Need != 6 || !strings.Contains(err.Error(), "need at least 6") {
		t.Fatalf("got %v", err)
	}
}
