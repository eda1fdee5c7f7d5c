package sweep

// This file is the sweep's only contact with the engine's config and run
// API: when the cluster config changes shape (deployments and pools), this
// is the file to edit.

import (
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
)

// cluster is one run's parsed and validated cluster config.
type cluster struct{ cfg config.Cluster }

// clusterType is the Go type the cluster YAML decodes into: the schema of
// the keys an axis may name.
func clusterType() reflect.Type { return reflect.TypeOf(config.Cluster{}) }

// parseCluster decodes and validates a cluster YAML with the engine's own
// parser (defaults, strict keys, value checks). name is used in messages.
func parseCluster(name string, b []byte) (*cluster, error) {
	cfg, err := config.Parse(name, b)
	if err != nil {
		return nil, err
	}
	return &cluster{cfg: cfg}, nil
}

// suggest is the config parser's "did you mean": the option closest to a
// mistyped key, or "".
func suggest(word string, options []string) string { return config.Suggest(word, options) }

// canonical is the effective config with every default filled in: two files
// that mean the same cluster give the same bytes.
func (c *cluster) canonical() []byte { return []byte(c.cfg.YAML()) }

// files lists the files the config reads (their contents are part of a
// run's identity): a coefficients file, a model config.json or GPU YAML
// given by path.
func (c *cluster) files() []string {
	var fs []string
	for _, d := range c.cfg.Resolved() {
		for _, p := range []string{d.Latency.Coefficients, d.Model, d.GPU} {
			if p == "" {
				continue
			}
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				fs = append(fs, p)
			}
		}
	}
	return fs
}

// gpus counts the GPUs the cluster uses, per GPU name: replicas × tp over
// every pool of every deployment.
func (c *cluster) gpus() map[string]int {
	g := map[string]int{}
	for _, d := range c.cfg.Resolved() {
		for _, p := range d.Pools {
			g[d.GPU] += p.Replicas * d.TP
		}
	}
	return g
}

// gpuNames lists the GPU names in a stable order.
func gpuNames(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// simulate runs the cluster on run's source, writing every result to its
// Results; run carries the workload's prefix block size, client cap and
// blis.prefix_unique promise. A cluster file's policy bundle
// (docs/policies.md) applies to every point.
func (c *cluster) simulate(run *sim.Run) (latencyModel string, err error) {
	setup, err := sim.New(c.cfg, nil)
	if err != nil {
		return "", err
	}
	_, err = setup.Run(run)
	return strings.Join(setup.LatencyNames(), " "), err
}

// sliceSource serves requests held in memory: streamed in order when the
// table promises sorted arrivals (memory follows requests in flight), else
// handed to the engine whole to be sorted and checked as a graph.
func sliceSource(reqs []trace.Request, sorted bool) engine.Source {
	if !sorted {
		return engine.SliceSource(reqs)
	}
	return &chunkSource{reqs: reqs}
}

// chunkSource streams a sorted slice in batches without copying rows' slices
// (the engine only reads them).
type chunkSource struct {
	reqs []trace.Request
	pos  int
}

const chunkRows = 4096

func (s *chunkSource) Next(buf []trace.Request) ([]trace.Request, error) {
	if s.pos >= len(s.reqs) {
		return buf[:0], io.EOF
	}
	end := min(s.pos+chunkRows, len(s.reqs))
	buf = append(buf[:0], s.reqs[s.pos:end]...)
	s.pos = end
	return buf, nil
}
