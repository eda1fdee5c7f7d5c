package synth

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/blis-sim/blis/examples/workloads"
	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/trace"
)

// examplesFS holds the built-in example specs: examples/workloads.
var examplesFS = workloads.FS

// Examples lists the built-in example names, sorted.
func Examples() []string {
	ents, _ := fs.ReadDir(examplesFS, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// ExampleSource returns the YAML of a built-in example.
func ExampleSource(name string) ([]byte, error) {
	b, err := examplesFS.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in example %q (have: %s)", name, strings.Join(Examples(), ", "))
	}
	return b, nil
}

// LoadExample parses a built-in example.
func LoadExample(name string) (*Spec, error) {
	b, err := ExampleSource(name)
	if err != nil {
		return nil, err
	}
	return Parse(b, "example:"+name, "")
}

// Describe returns the first comment block of an example (its one-line summary).
func Describe(name string) string {
	b, err := ExampleSource(name)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			return strings.TrimSpace(strings.TrimPrefix(l, "#"))
		}
	}
	return ""
}

// Meta returns the requests-table metadata for s: the sorted-arrival
// promise, the prefix block size, the promise that no two prompts start
// alike when none can, and this stage's provenance.
func Meta(s *Spec, args []string, inputs []trace.Input) trace.Meta {
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	md.Set(trace.MetaPrefixBlockSize, strconv.Itoa(s.PrefixBlockSize))
	md.Set(trace.MetaSourceFormat, "blis-synth")
	if s.MaxInFlight > 0 {
		md.Set(trace.MetaMaxInFlight, strconv.Itoa(s.MaxInFlight))
	}
	if s.PrefixUnique() {
		md.Set(trace.MetaPrefixUnique, "true")
	}
	seed := s.Seed
	return md.With(trace.Stage{Tool: "blis-synth", Version: trace.Version, Args: args, Seed: &seed, Inputs: inputs})
}

// Write synthesises s into a requests table at out ("-" for stdout).
func Write(s *Spec, out string, stdout io.Writer, md trace.Meta) (Stats, error) {
	schema := trace.RequestsSchema(md)
	// A file is written under a temporary name and renamed when complete, so
	// a failed run neither leaves a partial table nor removes an earlier one;
	// on stdout the stream is left without its end marker, so the next stage
	// reports it as truncated (trace.Abort).
	sink, err := trace.Create(out, stdout, schema)
	if err != nil {
		return Stats{}, err
	}
	w := trace.NewRequestWriter(sink, schema)
	st, err := pipeline(s, w)
	if err != nil {
		w.Abort()
		return st, err
	}
	return st, w.Close()
}

// Summary is a one-line account of a run for stderr.
func (st Stats) Summary(s *Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows (%d tool), %d sessions:", st.Rows, st.ToolRows, st.Sessions)
	for i, c := range s.Clients {
		fmt.Fprintf(&b, " %s %d/%d", c.Name, st.ClientSessions[i], st.ClientRows[i])
	}
	b.WriteString(" (sessions/rows)")
	return b.String()
}

// rowBatch carries rows from the generator to the Arrow encoder; the rows'
// slices point into its arenas.
type rowBatch struct {
	rows   []trace.Request
	hashes []uint64
	deps   []string
}

const pipeRows = 4096

// pipeline overlaps synthesis and Arrow encoding on two goroutines. Rows keep
// their order (one producer, one consumer), so the output is unchanged; the
// three batches are reused, so memory stays flat.
func pipeline(s *Spec, w *trace.RequestWriter) (Stats, error) {
	full := make(chan *rowBatch, 2)
	free := make(chan *rowBatch, 3)
	for range 3 {
		free <- &rowBatch{rows: make([]trace.Request, 0, pipeRows)}
	}
	var failed atomic.Bool
	werr := make(chan error, 1)
	go func() {
		defer bug.Catch()
		var err error
		for b := range full {
			for i := range b.rows {
				if err != nil {
					break
				}
				err = w.Write(&b.rows[i])
			}
			if err != nil {
				failed.Store(true)
			}
			b.rows, b.hashes, b.deps = b.rows[:0], b.hashes[:0], b.deps[:0]
			free <- b
		}
		werr <- err
	}()
	cur := <-free
	st, err := Generate(s, func(r *trace.Request) error {
		if failed.Load() {
			return errWriterFailed
		}
		c := *r
		if len(r.PrefixHashes) > 0 {
			n := len(cur.hashes)
			cur.hashes = append(cur.hashes, r.PrefixHashes...)
			c.PrefixHashes = cur.hashes[n:len(cur.hashes):len(cur.hashes)]
		}
		if len(r.DependsOn) > 0 {
			n := len(cur.deps)
			cur.deps = append(cur.deps, r.DependsOn...)
			c.DependsOn = cur.deps[n:len(cur.deps):len(cur.deps)]
		}
		cur.rows = append(cur.rows, c)
		if len(cur.rows) == pipeRows {
			full <- cur
			cur = <-free
		}
		return nil
	})
	full <- cur
	close(full)
	if e := <-werr; e != nil {
		return st, e // the writer's error explains errWriterFailed
	}
	return st, err
}

var errWriterFailed = errors.New("output failed")

// PrefixUnique reports whether no two of s's prompts can share their
// first block (the blis.prefix_unique promise): no client draws a shared system prompt (prefix groups), a
// conversation's accumulated context (its own, or an adversarial one's)
// or an agentic workflow's. Every other prompt starts with a segment of
// its own (Generator.newSeg), whose content id no other request has.
func (s *Spec) PrefixUnique() bool {
	for _, c := range s.Clients {
		if c.Prefix != nil || c.Agentic != nil {
			return false
		}
		if c.Conversation != nil && c.Conversation.ContextGrowth == "accumulate" {
			return false
		}
		if b := c.Behaviour; b != nil && b.attackConv != nil {
			return false
		}
	}
	return true
}
