package cluster_test

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
)

type rowSink struct{ rs []row.Result }

func (m *rowSink) Write(r *row.Result) error { m.rs = append(m.rs, *r); return nil }

// Reading ahead is a hint: a fleet gives the same results, events and
// steps with it as without, under the invariant checks, whatever the
// router, and with it on a cluster too small to use it by default; so
// does a gate that turns it on and off during the run (a threshold the
// requests held cross both ways).
func TestReadAheadChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		routing  string
		rate     float64 // req/s
	}{
		{"fleet round-robin", 300, "round-robin", 3600},
		{"fleet least-loaded", 300, "least-loaded", 3600},
		{"fleet prefix-affinity", 300, "prefix-affinity", 3600},
		{"small least-loaded", 8, "least-loaded", 96},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arr, lens := rng.New(1, "arrivals"), rng.New(1, "lengths")
			clamp := func(x float64) int32 { return int32(min(max(math.Round(x), 2), 4000)) }
			reqs := make([]row.Request, 3000)
			at := 0.0
			for i := range reqs {
				at += arr.ExpFloat64() / tc.rate
				reqs[i] = row.NewRequest(fmt.Sprint("r", i))
				reqs[i].ArrivalUS = int64(at * 1e6)
				reqs[i].InputTokens = clamp(512 + 256*lens.NormFloat64())
				reqs[i].OutputTokens = clamp(256 + 128*lens.NormFloat64())
			}
			run := func(from int, hot int64) ([]row.Result, engine.Summary) {
				defer cluster.SetAhead(from, hot)()
				cfg := config.Default()
				cfg.Replicas = tc.replicas
				cfg.Router.Routing = tc.routing
				models, _, err := engine.Prepare(&cfg)
				if err != nil {
					t.Fatal(err)
				}
				sink := &rowSink{}
				sum, err := engine.Run(cfg, models, engine.SliceSource(reqs), sink, engine.Options{CheckInvariants: true})
				if err != nil {
					t.Fatal(err)
				}
				return sink.rs, sum
			}
			offRows, offSum := run(math.MaxInt, 0)
			if offSum.Completed != int64(len(reqs)) {
				t.Fatalf("completed %d of %d", offSum.Completed, len(reqs))
			}
			for _, mode := range []struct {
				name string
				hot  int64
			}{{"always", 0}, {"gated", 40 * 768}} {
				onRows, onSum := run(1, mode.hot)
				if !reflect.DeepEqual(onSum, offSum) {
					t.Fatalf("%s: summary with read-ahead %+v, without %+v", mode.name, onSum, offSum)
				}
				if !reflect.DeepEqual(onRows, offRows) {
					for i := range onRows {
						if !reflect.DeepEqual(onRows[i], offRows[i]) {
							t.Fatalf("%s: row %d with read-ahead %+v, without %+v", mode.name, i, onRows[i], offRows[i])
						}
					}
					t.Fatalf("%s: results differ", mode.name)
				}
			}
		})
	}
}
