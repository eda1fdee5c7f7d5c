package measure

import (
	"bytes"
	"os"
	"testing"
)

func seed(f *testing.F, name string) {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

func FuzzReadServingPoints(f *testing.F) {
	seed(f, "silicon_h100_qwen3_32b.csv")
	f.Add([]byte(servingHeader + "a,m,h100_sxm,vllm,1,,agg,10,10,1,1,5,3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pts, _, err := ReadServingPoints("f.csv", bytes.NewReader(b), ServingFilter{})
		if err != nil {
			return
		}
		for _, p := range pts {
			if p.TTFTus <= 0 || p.TPOTus <= 0 || p.Concurrency <= 0 || p.InputTokens <= 0 {
				t.Fatalf("accepted a bad point %+v", p)
			}
		}
	})
}

func FuzzReadStepTimes(f *testing.F) {
	seed(f, "splitwise_h100_tp4.csv")
	f.Add([]byte("prefill_seqs,prefill_tokens,prefill_ctx,decode_seqs,decode_ctx,step_us\n1,100,0,3,900,4000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := ReadStepTimes("f.csv", bytes.NewReader(b), StepFilter{})
		if err != nil {
			return
		}
		for _, x := range s {
			if x.US <= 0 || x.Batch.Size() == 0 {
				t.Fatalf("accepted a bad step %+v", x)
			}
		}
	})
}

func FuzzReadTimeseries(f *testing.F) {
	seed(f, "llmss_rtx4090_timeseries.head20.csv")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadTimeseries("f.csv", bytes.NewReader(b))
		if err != nil {
			return
		}
		for i, x := range s {
			if x.Running < 0 || x.Waiting < 0 || x.KVPct < 0 || (i > 0 && x.T <= s[i-1].T) {
				t.Fatalf("accepted a bad tick %v", x)
			}
		}
	})
}
