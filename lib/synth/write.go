package synth

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// examplesFS holds the built-in example specs; examples/*.yaml at the
// repository root are byte-identical copies (a test keeps them in sync).
//
//go:embed examples/*.yaml
var examplesFS embed.FS

// Examples lists the built-in example names, sorted.
func Examples() []string {
	ents, _ := fs.ReadDir(examplesFS, "examples")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// ExampleSource returns the YAML of a built-in example.
func ExampleSource(name string) ([]byte, error) {
	b, err := examplesFS.ReadFile("examples/" + name + ".yaml")
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
// promise, the prefix block size and this stage's provenance.
func Meta(s *Spec, args []string, inputs []trace.Input) trace.Meta {
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	md.Set(trace.MetaPrefixBlockSize, strconv.Itoa(s.PrefixBlockSize))
	md.Set(trace.MetaSourceFormat, "blis-synth")
	seed := s.Seed
	return md.With(trace.Stage{Tool: "blis-synth", Version: trace.Version, Args: args, Seed: &seed, Inputs: inputs})
}

// Write synthesises s into a requests table at out ("-" for stdout).
func Write(s *Spec, out string, stdout io.Writer, md trace.Meta) (Stats, error) {
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(out, stdout, schema)
	if err != nil {
		return Stats{}, err
	}
	w := trace.NewRequestWriter(sink, schema)
	st, err := Generate(s, w.Write)
	if err != nil {
		// On stdout, leave the stream without its end marker so the next
		// stage reports it as truncated; a file is not left behind.
		if out != "" && out != "-" {
			w.Close()
			os.Remove(out)
		}
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
