package latency

import (
	"math"
	"strings"
	"testing"
)

// The embedded table parses and holds what blis-sim quotes: the roofline on
// every GPU family with a real vLLM run in ../shared.
func TestKnownErrorTable(t *testing.T) {
	rows, err := knownErrs()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("empty known-error table")
	}
	for _, r := range rows {
		if r.Model != "roofline" && r.Model != "fitted" || r.Points < 1 || r.Regime == "" ||
			math.IsNaN(r.TTFT) || math.IsNaN(r.TPOT) || r.TTFT < 0 || r.TPOT < 0 {
			t.Errorf("bad row %+v", r)
		}
	}
	for _, f := range []string{"Hopper", "Blackwell", "Ada"} {
		if !strings.HasPrefix(DescribeKnownError("roofline", f), "known roofline error on "+f+" GPUs") {
			t.Errorf("%s: %s", f, DescribeKnownError("roofline", f))
		}
	}
	if _, ok := KnownError("roofline", "Hopper", "closed loop, C ≤ 4"); !ok {
		t.Error("no roofline Hopper C ≤ 4 row")
	}
	// The saturated replays carry the capacity knee (issue 16 item 3).
	if r, ok := KnownError("roofline", "Ada", "saturated replay"); !ok || r.Capacity == nil || r.CapacityPoints != 1 ||
		!strings.Contains(DescribeKnownError("roofline", "Ada"), "saturated replay: TTFT "+pct(r.TTFT, r.TTFTBias)+", TPOT "+pct(r.TPOT, r.TPOTBias)+", capacity "+pct(*r.Capacity, *r.CapacityBias)+", 1 point") {
		t.Errorf("Ada saturated replay: %+v %v: %s", r, ok, DescribeKnownError("roofline", "Ada"))
	}
	if _, ok := KnownError("roofline", "Hopper", "open loop"); ok {
		t.Error("found a regime the harness does not have")
	}
}

func TestGPUFamily(t *testing.T) {
	for gpu, want := range map[string]string{"h100": "Hopper", "H200": "Hopper", "b200": "Blackwell", "rtxpro6000": "Blackwell",
		"rtx4090": "Ada", "l40s": "Ada", "a100-80gb": "Ampere", "MI300X": "mi300x"} {
		if got := GPUFamily(gpu); got != want {
			t.Errorf("GPUFamily(%q) = %q, want %q", gpu, got, want)
		}
	}
}

func TestDescribeKnownErrorFormat(t *testing.T) {
	if got, want := DescribeKnownError("roofline", "Volta"), "no measured error for the roofline model on Volta GPUs in bench/fidelity"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r, _ := KnownError("roofline", "Hopper", "closed loop, C ≤ 4")
	d := DescribeKnownError("roofline", "Hopper")
	part := "closed loop, C ≤ 4: TTFT " + pct(r.TTFT, r.TTFTBias) + ", TPOT " + pct(r.TPOT, r.TPOTBias)
	if !strings.Contains(d, part) {
		t.Errorf("%q lacks %q", d, part)
	}
	// Regimes in load order: C ≤ 4 before C 8–32 before C ≥ 64.
	if i, j := strings.Index(d, "C ≤ 4"), strings.Index(d, "C ≥ 64"); i < 0 || j < i {
		t.Errorf("order: %s", d)
	}
	if got := pct(12.4, -3.6); got != "12% (-4%)" {
		t.Errorf("pct = %q", got)
	}
}

type fixed struct{ us int64 }

func (f fixed) StepTime(*Batch) int64 { return f.us }
func (f fixed) Alpha() Alpha          { return Alpha{QueueBase: 7} }
func (f fixed) Name() string          { return "fixed" }

type fixedHost struct {
	fixed
	host int64
}

func (f fixedHost) HostStepUS(b *Batch) int64 { return f.host * int64(b.Size()) }
func (f fixedHost) HostTimed() bool           { return f.host > 0 }

func TestWithHost(t *testing.T) {
	b := &Batch{DecodeSeqs: 10}
	plain := fixed{1000}
	if WithHost(plain, false) != Model(plain) {
		t.Error("a model without CPU work must come back unchanged")
	}
	if m := (fixedHost{fixed{1000}, 0}); WithHost(m, false) != Model(m) {
		t.Error("HostTimed false must come back unchanged")
	}
	for _, tc := range []struct {
		async bool
		host  int64
		want  int64
	}{
		{false, 40, 1400}, {true, 40, 1000}, {true, 200, 2000}, {false, MaxStepUS, MaxStepUS},
	} {
		m := WithHost(fixedHost{fixed{1000}, tc.host}, tc.async)
		if got := m.StepTime(b); got != tc.want {
			t.Errorf("async %v host %d: step %d, want %d", tc.async, tc.host, got, tc.want)
		}
		if m.Name() != "fixed" || m.Alpha().QueueBase != 7 {
			t.Errorf("wrapper hides the model: %s %+v", m.Name(), m.Alpha())
		}
	}
}
