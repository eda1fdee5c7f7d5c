package measure

import (
	"fmt"
	"sort"

	"github.com/blis-sim/blis/lib/convert"
	"github.com/blis-sim/blis/lib/trace"
)

// ReadRunRequests reads the requests of a recorded run with lib/convert (any
// trace format it reads: LLMServingSim's vllm/requests.jsonl, a vLLM bench
// result, a requests table with recorded_* columns, ...) and checks that
// every request has a recorded TTFT and E2E on one clock. Requests come back
// in arrival order, times relative to the first. format "" detects it.
func ReadRunRequests(path, format string) ([]trace.Request, error) {
	reqs, err := convert.ReadRequests(path, format)
	if err != nil {
		return nil, err // convert marks its bad input itself
	}
	if len(reqs) == 0 {
		return nil, &InputError{Path: path, Msg: "expected at least one request, found none"}
	}
	var tpots []float64
	for i := range reqs {
		r := &reqs[i]
		line := int(r.SourceRow)
		switch {
		case r.SourceStatus == trace.SourceFailed:
			return nil, &InputError{Path: path, Line: line, Msg: fmt.Sprintf("request %s failed in the recorded run: a replay needs every request completed", r.ID)}
		case r.RecordedTTFTUS == trace.Null || r.RecordedE2EUS == trace.Null:
			return nil, &InputError{Path: path, Line: line, Field: trace.ColRecordedTTFTUS, Msg: fmt.Sprintf("request %s: expected a recorded TTFT and E2E, found none", r.ID)}
		case r.RecordedTTFTUS <= 0 || r.RecordedE2EUS < r.RecordedTTFTUS:
			return nil, &InputError{Path: path, Line: line, Field: trace.ColRecordedE2EUS, Msg: fmt.Sprintf("request %s: expected 0 < ttft ≤ e2e, found ttft %d µs and e2e %d µs", r.ID, r.RecordedTTFTUS, r.RecordedE2EUS)}
		case r.RecordedE2EUS > maxRequestUS:
			return nil, &InputError{Path: path, Line: line, Field: trace.ColRecordedE2EUS, Msg: fmt.Sprintf("request %s: expected a request shorter than 30 days, found %.3g s (inconsistent units or clocks?)", r.ID, float64(r.RecordedE2EUS)/1e6)}
		}
		if r.OutputTokens > 1 {
			tpots = append(tpots, float64(r.RecordedE2EUS-r.RecordedTTFTUS)/float64(r.OutputTokens-1)/1e6)
		}
	}
	// Per request a long stall can make any TPOT plausible; a run whose
	// median time per output token exceeds maxMedianTPOT was written in
	// other units (ms timestamps pass every per-row check).
	if len(tpots) > 0 {
		sort.Float64s(tpots)
		med := (tpots[(len(tpots)-1)/2] + tpots[len(tpots)/2]) / 2
		if med > maxMedianTPOT {
			return nil, &InputError{Path: path, Field: "last_token_ts", Msg: fmt.Sprintf("expected seconds, found a median time per output token of %.3g s over %d requests (inconsistent units: milliseconds?)", med, len(tpots))}
		}
	}
	return reqs, nil
}

// maxMedianTPOT (s) is far above any real decode (tens of ms per token);
// maxRequestUS is 30 days.
const (
	maxMedianTPOT = 10
	maxRequestUS  = 30 * 86400 * 1e6
)
