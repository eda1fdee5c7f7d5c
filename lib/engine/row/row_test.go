package row

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Every bad value is named by its column, and a good row passes.
func TestRequestValidate(t *testing.T) {
	ok := func() Request {
		r := NewRequest("r1")
		r.ArrivalUS, r.InputTokens, r.OutputTokens = 0, 10, 5
		return r
	}
	for _, tc := range []struct {
		name string
		edit func(*Request)
		want string // "" = valid; else a substring of the error
	}{
		{"valid", func(*Request) {}, ""},
		{"dependent without arrival", func(r *Request) { r.ArrivalUS, r.DependsOn = Null, []string{"r0"} }, ""},
		{"tool without tokens", func(r *Request) { r.Kind, r.InputTokens = KindTool, 0 }, ""},
		{"failed source row without tokens", func(r *Request) { r.SourceStatus, r.InputTokens = SourceFailed, 0 }, ""},
		{"empty id", func(r *Request) { r.ID = "" }, ColRequestID},
		{"unknown kind", func(r *Request) { r.Kind = "batch" }, ColKind},
		{"negative input", func(r *Request) { r.InputTokens = -1 }, ColInputTokens},
		{"negative output", func(r *Request) { r.OutputTokens = -1 }, ColOutputTokens},
		{"negative delay", func(r *Request) { r.DelayUS = -1 }, ColDelayUS},
		{"no arrival, no dependency", func(r *Request) { r.ArrivalUS = Null }, ColArrivalUS},
		{"negative arrival", func(r *Request) { r.ArrivalUS = -5 }, ColArrivalUS},
		{"llm without prompt", func(r *Request) { r.InputTokens = 0 }, ColInputTokens},
		{"negative recorded ttft", func(r *Request) { r.RecordedTTFTUS = -1 }, ColRecordedTTFTUS},
		{"negative recorded itl", func(r *Request) { r.RecordedITLUS = -1 }, ColRecordedITLUS},
		{"negative timeout", func(r *Request) { r.TimeoutUS = -1 }, ColTimeoutUS},
		{"negative images", func(r *Request) { r.NumImages = -1 }, ColNumImages},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.edit(&r)
			err := r.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "column "+tc.want)):
				t.Fatalf("error %v, want one naming column %s", err, tc.want)
			}
		})
	}
}

func TestNewRequestAndResultDefaults(t *testing.T) {
	r := NewRequest("x")
	if r.Kind != KindLLM || !r.Streaming || r.ArrivalUS != Null || r.RecordedTTFTUS != Null || r.RecordedE2EUS != Null || r.RecordedITLUS != Null {
		t.Fatalf("NewRequest: %+v", r)
	}
	res := NewResult(r)
	if res.ID != "x" || res.InstanceID != -1 || res.KVTransferUS != Null || res.KVTransferWaitUS != Null {
		t.Fatalf("NewResult: %+v", res)
	}
	for name, v := range map[string]int64{"admitted": res.AdmittedUS, "routed": res.RoutedUS, "enqueued": res.EnqueuedUS,
		"first scheduled": res.FirstScheduledUS, "first token": res.FirstTokenUS, "finished": res.FinishedUS,
		"ttft": res.TTFTUS, "e2e": res.E2EUS, "tpot": res.TPOTUS} {
		if v != Null {
			t.Errorf("NewResult: %s = %d, want Null", name, v)
		}
	}
}

func TestRowError(t *testing.T) {
	inner := errors.New("column input_tokens: expected >= 0, found -1")
	for _, tc := range []struct {
		e    RowError
		want string
	}{
		{RowError{Path: "in.arrow", Row: 3, Err: inner}, "in.arrow: row 3: column input_tokens: expected >= 0, found -1"},
		{RowError{Path: "in.arrow", Row: 3, RequestID: "r7", Err: inner}, "in.arrow: row 3 (request r7): column input_tokens: expected >= 0, found -1"},
		{RowError{Path: "in.arrow", Row: 3, RequestID: "r7", SourceRow: 12, Err: inner}, "in.arrow: row 3 (request r7, source row 12): column input_tokens: expected >= 0, found -1"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
		if !errors.Is(&tc.e, inner) || !tc.e.BadInput() {
			t.Errorf("%q: does not unwrap to its cause or is not bad input", tc.want)
		}
	}
}

// The fixed tiers come first, then each other name once, in order of first
// appearance; no tiers, no names.
func TestTierNames(t *testing.T) {
	for _, tc := range []struct {
		in   [][]string
		want []string
	}{
		{nil, nil},
		{[][]string{nil, {}}, nil},
		{[][]string{{"cpu"}}, []string{"cpu", "storage"}},
		{[][]string{{"cxl", "cpu"}, {"remote", "cxl"}}, []string{"cpu", "storage", "cxl", "remote"}},
	} {
		if got := TierNames(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("TierNames(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if TierColumn("cxl") != "cached_tokens_cxl" {
		t.Error("TierColumn")
	}
	if got := TierNames([][]string{{"cpu"}}); &got[0] == &FixedTiers[0] {
		t.Error("TierNames returned FixedTiers itself: a caller's append would write into it")
	}
}
