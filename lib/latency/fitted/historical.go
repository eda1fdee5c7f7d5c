package fitted

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
)

// historicalHeader is the published BLIS coefficient table layout
// (blackbox_coefficients_historical.csv). α in µs, µs/input token, µs/output
// token; β0 µs per step, β1 µs per prefill token, β2 µs per decode token.
var historicalHeader = []string{"model", "gpu", "tp", "vllm_version", "alpha0", "alpha1", "alpha2", "beta0", "beta1", "beta2", "best_loss", "note"}

// ReadHistoricalCSV loads the published BLIS per-(model, GPU, TP, vLLM
// version) fits as Coefficients with the feature set [const,
// prefill_tokens, decode_tokens]; name is used in errors and as the source path.
func ReadHistoricalCSV(name string, r io.Reader) ([]*Coefficients, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, h := range historicalHeader[:10] {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s: line 1: expected column %q, found header %q", name, h, strings.Join(head, ","))
		}
	}
	var out []*Coefficients
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(rec) < len(head) {
			return nil, fmt.Errorf("%s: line %d: expected %d fields, found %d", name, line, len(head), len(rec))
		}
		num := func(f string) (float64, error) {
			s := strings.TrimSpace(rec[col[f]])
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("%s: line %d: field %s: expected a number, found %q", name, line, f, s)
			}
			return v, nil
		}
		var vals [6]float64
		for i, f := range []string{"alpha0", "alpha1", "alpha2", "beta0", "beta1", "beta2"} {
			if vals[i], err = num(f); err != nil {
				return nil, err
			}
		}
		tpS := strings.TrimSpace(rec[col["tp"]])
		tp, err := strconv.Atoi(tpS)
		if err != nil || tp < 1 {
			return nil, fmt.Errorf("%s: line %d: field tp: expected a positive integer, found %q", name, line, tpS)
		}
		ver := strings.TrimSpace(rec[col["vllm_version"]])
		if i := strings.LastIndex(ver, ":"); i >= 0 {
			ver = ver[i+1:]
		}
		ver = strings.TrimPrefix(ver, "v")
		c := &Coefficients{
			Model: strings.TrimSpace(rec[col["model"]]), GPU: strings.TrimSpace(rec[col["gpu"]]), TP: tp,
			Engine: "vllm", Version: ver,
			Terms:   []Term{{Const, vals[3]}, {PrefillTokens, vals[4]}, {DecodeTokens, vals[5]}},
			Alpha:   latency.Alpha{QueueBase: vals[0], QueuePerInputToken: vals[1], PerOutputToken: vals[2]},
			Sources: []Source{{Path: name, Rows: 1, Filter: fmt.Sprintf("line %d", line)}},
			Fit:     FitInfo{Method: "published"},
		}
		if i, ok := col["note"]; ok && i < len(rec) {
			c.Notes = strings.TrimSpace(rec[i])
		}
		if err := c.Validate(fmt.Sprintf("%s: line %d", name, line)); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Linear converts a [const, prefill_tokens, decode_tokens] fit to latency.Linear.
func (c *Coefficients) Linear() (*latency.Linear, bool) {
	if len(c.Terms) != 3 || c.Terms[0].Feature != Const || c.Terms[1].Feature != PrefillTokens || c.Terms[2].Feature != DecodeTokens {
		return nil, false
	}
	return &latency.Linear{Beta0: c.Terms[0].Value, Beta1: c.Terms[1].Value, Beta2: c.Terms[2].Value, A: c.Alpha,
		Label: fmt.Sprintf("linear:%s/%s/tp%d/%s-%s", c.Model, c.GPU, c.TP, c.Engine, c.Version)}, true
}
