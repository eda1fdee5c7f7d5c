package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/convert"
	"github.com/blis-sim/blis/lib/synth"
	"github.com/blis-sim/blis/lib/trace"
)

// A workload is a recorded trace (any table or trace blis-convert reads,
// with its replay options) or a blis-synth spec. Its document is what
// workload.* axes address.
type workload struct {
	kind string     // "trace" or "synth"
	doc  *yaml.Node // trace options, or the synth spec
	name string     // file for messages
	dir  string     // base for the synth spec's relative paths
}

// traceOptions are the replay options of a trace workload; they mean what
// blis-convert's flags of the same names mean.
type traceOptions struct {
	Trace       string  `yaml:"trace"`        // the trace or requests table
	Format      string  `yaml:"format"`       // blis-convert --format ("" = detect)
	Speedup     float64 `yaml:"speedup"`      // divide arrival times and delays by this
	Sample      float64 `yaml:"sample"`       // keep each session with this probability
	Seed        uint64  `yaml:"seed"`         // seed of sample (the seed axis sets it)
	Start       string  `yaml:"start"`        // window start (duration from the first request, or RFC 3339)
	End         string  `yaml:"end"`          // window end
	Limit       int64   `yaml:"limit"`        // stop after this many rows
	FilterModel string  `yaml:"filter_model"` // keep only sessions of this model
}

func (w *workload) schema() reflect.Type {
	if w.kind == "trace" {
		return reflect.TypeOf(traceOptions{})
	}
	return synthType()
}

func (s *Spec) loadWorkload(v *yaml.Node) (*workload, error) {
	if v.Kind == yaml.ScalarNode {
		var p string
		if err := v.Decode(&p); err != nil || p == "" {
			return nil, errors.New("expected a file or a mapping")
		}
		key := "trace"
		if ext := strings.ToLower(filepath.Ext(p)); ext == ".yaml" || ext == ".yml" {
			key = "synth"
		}
		m := newMap()
		mapSet(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p})
		v = m
	}
	if v.Kind != yaml.MappingNode {
		return nil, errors.New("expected a file or a mapping: {trace: FILE, ...}, {synth: FILE}, {example: NAME} or an inline blis-synth spec")
	}
	w := &workload{}
	switch {
	case mapGet(v, "trace") != nil:
		w.kind, w.name = "trace", s.File
		w.doc = cloneNode(v)
		var o traceOptions
		if err := decodeStrict(w.doc, &o); err != nil {
			return nil, fmt.Errorf("%s (valid keys: %s)", err, strings.Join(traceKeys(), ", "))
		}
		// The trace path is relative to the sweep spec: store it resolved.
		mapSet(w.doc, "trace", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s.path(o.Trace)})
	case mapGet(v, "synth") != nil || mapGet(v, "example") != nil:
		var src []byte
		if f := mapGet(v, "synth"); f != nil {
			if mapGet(v, "example") != nil {
				return nil, errors.New("give synth or example, not both")
			}
			p := s.path(f.Value)
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			src, w.name, w.dir = b, p, filepath.Dir(p)
		} else {
			name := mapGet(v, "example").Value
			b, err := synth.ExampleSource(name)
			if err != nil {
				return nil, err
			}
			src, w.name, w.dir = b, "example "+name, s.Dir
		}
		var d yaml.Node
		if err := yaml.Unmarshal(src, &d); err != nil {
			return nil, fmt.Errorf("%s: %s", w.name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		w.kind, w.doc = "synth", cloneNode(docRoot(&d))
		if w.doc == nil || w.doc.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: expected a blis-synth spec (a mapping)", w.name)
		}
		// Keys beside synth/example override the spec's top-level keys.
		for i := 0; i+1 < len(v.Content); i += 2 {
			if k := v.Content[i].Value; k != "synth" && k != "example" {
				if _, err := checkKeys(synthType(), w.doc, []elem{{key: k}}, "the workload"); err != nil {
					return nil, err
				}
				mapSet(w.doc, k, cloneNode(v.Content[i+1]))
			}
		}
	default:
		w.kind, w.name, w.dir = "synth", s.File+" (workload)", s.Dir
		w.doc = cloneNode(v)
	}
	if _, err := w.parse(w.doc); err != nil {
		return nil, err
	}
	return w, nil
}

func traceKeys() []string {
	names, _ := fieldsOf(reflect.TypeOf(traceOptions{}))
	return names
}

// resolvedWorkload is one run's workload, checked.
type resolvedWorkload struct {
	kind  string
	trace traceOptions
	spec  []byte // synth: the spec as YAML
	name  string
	dir   string
	files []string // files read (their digests are part of the identity)
}

// parse checks a workload document with the real parsers.
func (w *workload) parse(doc *yaml.Node) (*resolvedWorkload, error) {
	r := &resolvedWorkload{kind: w.kind, name: w.name, dir: w.dir}
	switch w.kind {
	case "trace":
		if err := decodeStrict(doc, &r.trace); err != nil {
			return nil, err
		}
		o := &r.trace
		switch {
		case o.Trace == "":
			return nil, errors.New("trace: expected a file")
		case o.Speedup < 0:
			return nil, fmt.Errorf("speedup: expected > 0, found %g", o.Speedup)
		case o.Sample < 0 || o.Sample > 1:
			return nil, fmt.Errorf("sample: expected a probability in (0, 1], found %g", o.Sample)
		case o.Limit < 0:
			return nil, fmt.Errorf("limit: expected >= 0, found %d", o.Limit)
		}
		if o.Speedup == 0 {
			o.Speedup = 1
		}
		st, err := os.Stat(o.Trace)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file (a sweep reads its workload many times)", o.Trace)
		}
		r.files = []string{o.Trace}
	case "synth":
		b, err := encodeNode(doc)
		if err != nil {
			return nil, err
		}
		sp, err := synth.Parse(b, w.name, w.dir)
		if err != nil {
			return nil, err
		}
		r.spec, r.files = b, sp.Inputs
	}
	return r, nil
}

// setSeed makes a workload document use seed s.
func (w *workload) setSeed(doc *yaml.Node, s uint64) {
	mapSet(doc, "seed", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(s, 10)})
}

// identity is what makes two workloads the same: the options or spec, and
// the digests of the files they read.
func (r *resolvedWorkload) identity(d *digests) (any, error) {
	// Contents, not paths: the same files reached from another directory
	// (a Slurm task, another checkout) are the same workload.
	var files []string
	for _, f := range r.files {
		h, err := d.of(f)
		if err != nil {
			return nil, err
		}
		files = append(files, h)
	}
	if r.kind == "trace" {
		o := r.trace
		o.Trace = ""
		if o.Sample == 0 {
			o.Seed = 0 // the seed only draws the sample
		}
		return struct {
			Kind    string
			Options traceOptions
			Files   []string
		}{"trace", o, files}, nil
	}
	return struct {
		Kind  string
		Spec  string
		Files []string
	}{"synth", string(r.spec), files}, nil
}

// digests memoises the SHA-256 of input files for one process.
type digests struct {
	mu sync.Mutex
	m  map[string]string
}

func (d *digests) of(path string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h, ok := d.m[path]; ok {
		return h, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if d.m == nil {
		d.m = map[string]string{}
	}
	s := hex.EncodeToString(h.Sum(nil))
	d.m[path] = s
	return s, nil
}

// requests is a workload in memory, shared read-only by the runs using it.
type requests struct {
	rows         []trace.Request
	sorted       bool
	prefixBlock  int
	maxInFlight  int  // blis.max_in_flight
	prefixUnique bool // blis.prefix_unique (kept by the conversion: it only drops and retimes rows)
	path         string
}

// loadTrace converts a trace with its options, as blis-convert would.
func loadTrace(o traceOptions) (*requests, error) {
	opts := convert.Options{Format: o.Format, Inputs: []string{o.Trace}, Speedup: o.Speedup, Sample: o.Sample,
		Seed: o.Seed, Start: o.Start, End: o.End, Limit: o.Limit, FilterModel: o.FilterModel, Tool: "blis-sweep"}
	var buf bytes.Buffer
	if _, err := convert.Convert(opts, "-", nil, &buf); err != nil {
		return nil, err
	}
	src, err := trace.Open("-", &buf)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	rows, err := trace.ReadAllRequests(src)
	if err != nil {
		return nil, err
	}
	md := src.Meta()
	r := &requests{rows: rows, sorted: md.Get(trace.MetaSorted) == "arrival", path: o.Trace}
	if v := md.Get(trace.MetaPrefixBlockSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %s: expected a positive integer, found %q", o.Trace, trace.MetaPrefixBlockSize, v)
		}
		r.prefixBlock = n
	}
	if r.maxInFlight, err = md.MaxInFlight(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Trace, err)
	}
	if r.prefixUnique, err = md.PrefixUnique(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Trace, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no requests left after the workload options", o.Trace)
	}
	return r, nil
}
