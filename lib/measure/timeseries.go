package measure

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Sample is one tick of an engine's time series: what vLLM's metrics
// logger reports once a second.
type Sample struct {
	T          float64 // s since the run started
	Running    int     // requests being scheduled (num_requests_running)
	Waiting    int     // requests waiting for admission (num_requests_waiting)
	KVPct      float64 // KV cache usage, % of the GPU blocks
	PromptTput float64 // prompt tokens/s over the last tick
	GenTput    float64 // generated tokens/s over the last tick
}

// ReadTimeseries reads LLMServingSim's vllm/timeseries.csv (t,
// prompt_throughput, gen_throughput, running, waiting, kv_cache_pct).
// Ticks must be in time order.
func ReadTimeseries(path string, r io.Reader) ([]Sample, error) {
	t, err := newCSVTable(path, r, "t", "running", "waiting", "kv_cache_pct", "prompt_throughput", "gen_throughput")
	if err != nil {
		return nil, err
	}
	var out []Sample
	for {
		if err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		var s Sample
		if s.T, err = t.float("t", false); err != nil {
			return nil, err
		}
		if len(out) > 0 && s.T <= out[len(out)-1].T {
			return nil, t.errf("t", "expected times in increasing order, found %g after %g", s.T, out[len(out)-1].T)
		}
		if s.Running, err = t.count("running", false); err != nil {
			return nil, err
		}
		if s.Waiting, err = t.count("waiting", false); err != nil {
			return nil, err
		}
		if s.KVPct, err = t.float("kv_cache_pct", false); err != nil {
			return nil, err
		}
		if s.KVPct > 100.5 {
			return nil, t.errf("kv_cache_pct", "expected a percentage (0–100), found %g", s.KVPct)
		}
		if s.PromptTput, err = t.float("prompt_throughput", false); err != nil {
			return nil, err
		}
		if s.GenTput, err = t.float("gen_throughput", false); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, &InputError{Path: path, Msg: "expected at least one tick, found none"}
	}
	return out, nil
}

// ReadTimeseriesFile is ReadTimeseries on a file.
func ReadTimeseriesFile(path string) ([]Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &InputError{Path: path, Msg: err.Error()}
	}
	defer f.Close()
	return ReadTimeseries(path, f)
}

// Sprint of a sample, for messages.
func (s Sample) String() string {
	return fmt.Sprintf("t=%gs running=%d waiting=%d kv=%.1f%%", s.T, s.Running, s.Waiting, s.KVPct)
}
