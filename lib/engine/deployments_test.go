package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// twoModels is a cluster of two deployments with linear latency models and
// fixed KV, so no catalogue lookup is needed to run it.
const twoModels = `
deployments:
  - id: small
    model: llama-3.1-8b
    aliases: [chat]
    gpu: h100
    engine: {kv_blocks: 1000}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools: [{role: monolithic, replicas: 2}]
  - id: big
    model: qwen3-32b
    gpu: h200
    tp: 2
    engine: {kv_blocks: 500, max_num_seqs: 8}
    latency: {mode: linear, beta: [3000, 2, 30]}
    pools: [{role: monolithic, replicas: 1}]
router: {routing: least-loaded}
`

func parse(t *testing.T, yaml string) (config.Cluster, []latency.Model) {
	t.Helper()
	c, err := config.Parse("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	models, _, err := Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	return c, models
}

func withModel(r row.Request, m string) row.Request { r.Model = m; return r }

func TestDeploymentsServeTheirModels(t *testing.T) {
	c, models := parse(t, twoModels)
	reqs := []row.Request{
		withModel(req("a", 0, 100, 5), "llama-3.1-8b"),
		withModel(req("b", 10, 100, 5), "meta-llama/Llama-3.1-8B-Instruct"), // HF id of the same model
		withModel(req("c", 20, 100, 5), "chat"),                             // an alias
		withModel(req("d", 30, 100, 5), "Qwen/Qwen3-32B"),
		withModel(req("e", 40, 100, 5), "qwen3-32b"),
		withModel(req("f", 50, 100, 5), "gpt-4"),
	}
	for _, stream := range []bool{false, true} {
		var src Source = SliceSource(reqs)
		if stream {
			src = &chunkSource{reqs: reqs, n: 2}
		}
		sink := &memSink{}
		sum, err := Run(c, models, src, sink, Options{CheckInvariants: true})
		if err != nil {
			t.Fatal(err)
		}
		got := sink.byID()
		want := map[string]string{"a": "small", "b": "small", "c": "small", "d": "big", "e": "big"}
		for id, dep := range want {
			r := got[id]
			if r.Status != row.StatusCompleted || r.Deployment != dep || !strings.HasPrefix(r.ReplicaID, dep+"/") {
				t.Fatalf("%s: status %s deployment %q replica %q, want completed on %s", id, r.Status, r.Deployment, r.ReplicaID, dep)
			}
		}
		// The big model's step is slower: its TTFT is its own β0 + β1·100.
		if got["d"].TTFTUS != 3000+2*100 {
			t.Fatalf("d TTFT %d, want 3200 from the big deployment's model", got["d"].TTFTUS)
		}
		if f := got["f"]; f.Status != row.StatusRejected || f.DropReason != "no deployment serves model gpt-4" || f.ReplicaID != "" {
			t.Fatalf("f: %+v", f)
		}
		if sum.Rejected != 1 || sum.Completed != 5 || len(sum.Deployments) != 2 || sum.Deployments[1].Replicas != 1 {
			t.Fatalf("%+v", sum)
		}
		// least-loaded spreads a, b, c over the two small replicas.
		if got["a"].ReplicaID == got["b"].ReplicaID {
			t.Fatalf("a and b both on %s", got["a"].ReplicaID)
		}
	}
}

func TestModelColumnRules(t *testing.T) {
	c, models := parse(t, twoModels)
	// Several models served: a row without one is an input error naming the column.
	_, err := Run(c, models, SliceSource([]row.Request{req("x", 0, 10, 1)}), &memSink{}, Options{Path: "in.arrow"})
	var re *row.RowError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column model: null, but the cluster serves several models") {
		t.Fatalf("got %v", err)
	}
	// One deployment: rows without a model go to it; others must match.
	one, m1 := parse(t, `
deployments:
  - {id: only, model: llama-3.1-8b, gpu: h100, engine: {kv_blocks: 100}, latency: {beta: [1, 1, 1]}, pools: [{replicas: 1}]}
`)
	sink := &memSink{}
	if _, err := Run(one, m1, SliceSource([]row.Request{req("x", 0, 10, 1), withModel(req("y", 0, 10, 1), "mistral-nemo")}), sink, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := sink.byID(); got["x"].ReplicaID != "only/0" || got["y"].Status != row.StatusRejected {
		t.Fatalf("%+v", got)
	}
	// The flat form serves every request whatever its model (as before).
	flat := testConfig()
	sink = &memSink{}
	if _, err := Run(flat, testModel(flat), SliceSource([]row.Request{withModel(req("z", 0, 10, 1), "GPT-4")}), sink, Options{}); err != nil {
		t.Fatal(err)
	}
	if r := sink.rs[0]; r.Status != row.StatusCompleted || r.Deployment != "llama-3.1-8b" || r.ReplicaID != "llama-3.1-8b/0" {
		t.Fatalf("%+v", r)
	}
}

func TestHeterogeneousDeploymentsShareRouting(t *testing.T) {
	// The same model on two GPU types: one candidate group, routing
	// chooses among all three replicas.
	c, models := parse(t, `
deployments:
  - {id: h100, model: llama-3.1-8b, gpu: h100, engine: {kv_blocks: 1000}, latency: {beta: [1000, 1, 10]}, pools: [{replicas: 2}]}
  - {id: a100, model: meta-llama/Llama-3.1-8B-Instruct, gpu: a100-80gb, engine: {kv_blocks: 1000}, latency: {beta: [2000, 2, 20]}, pools: [{replicas: 1}]}
router: {routing: round-robin}
`)
	var reqs []row.Request
	for i := 0; i < 6; i++ {
		reqs = append(reqs, withModel(req(fmt.Sprint("r", i), int64(i), 50, 2), "llama-3.1-8b"))
	}
	sink, _ := runModels(t, c, models, reqs)
	per := map[string]int{}
	for _, r := range sink.rs {
		per[r.ReplicaID]++
	}
	if per["h100/0"] != 2 || per["h100/1"] != 2 || per["a100/0"] != 2 {
		t.Fatalf("%v", per)
	}
}

func runModels(t *testing.T, c config.Cluster, models []latency.Model, reqs []row.Request) (*memSink, Summary) {
	t.Helper()
	sink := &memSink{}
	sum, err := Run(c, models, SliceSource(reqs), sink, Options{CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	return sink, sum
}

func TestDeploymentConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown gpu", `
deployments:
  - id: a
    model: llama-3.1-8b
    gpu: h900
    pools: [{replicas: 1}]
`, "c.yaml:5: deployments[0].gpu: "},
		{"unknown model", `
deployments:
  - id: a
    model: llama-9b
    gpu: h100
    pools: [{replicas: 1}]
`, "c.yaml:4: deployments[0].model: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("c.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Prepare(&c)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error starting %q", err, tc.want)
			}
		})
	}
}
