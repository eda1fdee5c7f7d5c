package sim_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

type resultRows struct{ rs []row.Result }

func (s *resultRows) Write(r *row.Result) error {
	c := *r
	c.PrefixHashes = append([]uint64(nil), r.PrefixHashes...)
	s.rs = append(s.rs, c)
	return nil
}

// A table's blis.prefix_unique promise reaches the engine and changes no
// result, on caches small enough to preempt and evict; it is not carried
// to the results; a broken promise fails the run.
func TestPrefixUniqueFromTable(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("replicas: 3\nengine: {kv_blocks: 300}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reqs := leapWorkload(1500, 40)
	for i := range reqs {
		for j := range reqs[i].PrefixHashes {
			reqs[i].PrefixHashes[j] = uint64(i+1)<<40 | uint64(j)
		}
	}
	write := func(name string, promise bool, rows []trace.Request) string {
		path := filepath.Join(dir, name)
		md := trace.NewMeta()
		md.Set(trace.MetaSorted, "arrival")
		if promise {
			md.Set(trace.MetaPrefixUnique, "true")
		}
		writeTable(t, path, md, rows)
		return path
	}
	run := func(path string) (*resultRows, engine.Summary, error) {
		s, err := sim.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		input, err := sim.OpenInput(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer input.Close()
		got := &resultRows{}
		res := sim.Output{Sink: got}
		if strings.Contains(path, "promise") {
			res = sim.Output{Path: filepath.Join(dir, "res.arrows")}
		}
		o, err := s.Run(&sim.Run{Source: input.Source, Path: input.Path, InputMeta: input.Meta, PrefixUnique: input.PrefixUnique,
			Stage: trace.Stage{Tool: "test"}, Results: res, CheckInvariants: true})
		if err != nil {
			return nil, engine.Summary{}, err
		}
		if res.Path != "" {
			got = readResults(t, res.Path)
		}
		return got, o.Summary, nil
	}
	plain, ps, err := run(write("plain.arrows", false, reqs))
	if err != nil {
		t.Fatal(err)
	}
	uniq, us, err := run(write("promise.arrows", true, reqs))
	if err != nil {
		t.Fatal(err)
	}
	if ps.Preemptions == 0 || ps.Evictions == 0 {
		t.Fatalf("%d preemptions, %d evictions: the cache is not small enough to test", ps.Preemptions, ps.Evictions)
	}
	if !reflect.DeepEqual(ps, us) || !reflect.DeepEqual(plain.rs, uniq.rs) {
		t.Fatalf("results differ with the promise (summaries %+v and %+v)", ps, us)
	}
	src, err := trace.Open(filepath.Join(dir, "res.arrows"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := src.Meta().Get(trace.MetaPrefixUnique); v != "" {
		t.Errorf("results carry %s=%q", trace.MetaPrefixUnique, v)
	}
	src.Close()

	broken := append([]trace.Request(nil), reqs...)
	for i := 701; i < 760; i++ { // requests with request 700's prompt
		broken[i].PrefixHashes = reqs[700].PrefixHashes[:min(len(reqs[700].PrefixHashes), len(reqs[i].PrefixHashes))]
	}
	_, _, err = run(write("broken-promise.arrows", true, broken))
	if !errors.Is(err, cluster.ErrPrefixClash) || !badinput.Is(err) || !strings.HasPrefix(err.Error(), filepath.Join(dir, "broken-promise.arrows")+": ") {
		t.Fatalf("a broken promise: %v", err)
	}
}

// readResults reads a results table's rows (trace.ReadAllResults).
func readResults(t *testing.T, path string) *resultRows {
	t.Helper()
	src, err := trace.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rs, err := trace.ReadAllResults(src)
	if err != nil {
		t.Fatal(err)
	}
	return &resultRows{rs: rs}
}

// With decisions, counterfactual regret (forks of the caches) and steps,
// every table is byte-identical with the promise and without it.
func TestPrefixUniqueOutputsIdentical(t *testing.T) {
	for _, yaml := range []string{
		"replicas: 3\nengine: {kv_blocks: 300}\n",
		"replicas: 4\nengine: {kv_blocks: 500}\nrouter: {routing: weighted}\n",
	} {
		cfg, err := config.Parse("c.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		reqs := leapWorkload(1200, 40)
		for i := range reqs {
			for j := range reqs[i].PrefixHashes {
				reqs[i].PrefixHashes[j] = uint64(i+1)<<40 | uint64(j)
			}
		}
		var out [2]map[string][]byte
		for i, unique := range []bool{false, true} {
			s, err := sim.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			bufs := map[string]*bytes.Buffer{}
			o := func(name string) sim.Output {
				bufs[name] = &bytes.Buffer{}
				return sim.Output{Path: "-", W: bufs[name], Label: name}
			}
			slos, err := slo.Parse([]string{"ttft=300ms"})
			if err != nil {
				t.Fatal(err)
			}
			r := &sim.Run{Source: engine.SliceSource(reqs), Path: "test", InputMeta: trace.NewMeta(), PrefixUnique: unique,
				Stage: trace.Stage{Tool: "test"}, Results: o("results"), Steps: o("steps"),
				Decisions: o("decisions"), Anomalies: o("anomalies"), CheckInvariants: true,
				Trace: sim.Trace{Level: decision.Decisions, SLOs: slos, Regret: decision.RegretConfig{Sample: 0.1, Seed: 7}}}
			if _, err := s.Run(r); err != nil {
				t.Fatal(err)
			}
			out[i] = map[string][]byte{}
			for k, v := range bufs {
				out[i][k] = v.Bytes()
			}
		}
		for k, v := range out[0] {
			if !bytes.Equal(v, out[1][k]) {
				t.Errorf("%q: %s differ with the promise", yaml, k)
			}
		}
	}
}
