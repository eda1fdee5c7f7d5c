package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Stage is one tool's entry in a table's provenance chain. It carries no wall
// clock time so that outputs stay byte-identical across runs.
type Stage struct {
	Tool    string   `json:"tool"`
	Version string   `json:"version"`
	Args    []string `json:"args,omitempty"`
	Seed    *uint64  `json:"seed,omitempty"`
	Inputs  []Input  `json:"inputs,omitempty"`
}

// Input names one input of a stage and, when it was a regular file, its digest.
type Input struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// BaseVersion is the toolkit's release line, the version of a build that
// says nothing more precise (go test, go run).
const BaseVersion = "0.1.0"

// version and commit may be set at link time (make build sets commit):
// go build -ldflags "-X github.com/blis-sim/blis/lib/trace.version=1.2.3".
var version, commit string

// Version is the toolkit version printed by --version and recorded in
// provenance: the link-time version, else the main module's version from
// the build info (a tag with `go install …@v1.2.3`, or the pseudo-version
// Go stamps in a git checkout), else BaseVersion with the commit (from the
// link time or the build info's vcs.revision; -dirty when modified).
var Version = resolveVersion(version, commit)

func resolveVersion(ldVersion, ldCommit string) string {
	if ldVersion != "" {
		return ldVersion
	}
	rev, dirty := ldCommit, false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && rev == "":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = true
			}
		}
	}
	if rev == "" {
		return BaseVersion
	}
	if len(rev) == 40 { // a full vcs.revision
		rev = rev[:12]
	}
	if dirty && !strings.HasSuffix(rev, "-dirty") {
		rev += "-dirty"
	}
	return BaseVersion + "+" + rev
}

// Meta is a table's schema metadata. Keys are written in sorted order so the
// encoded schema is deterministic.
type Meta struct {
	kv         map[string]string
	Provenance []Stage
}

// NewMeta returns empty metadata.
func NewMeta() Meta { return Meta{kv: map[string]string{}} }

// MetaFromSchema reads the metadata of a schema written by any BLIS tool, or
// by anyone else (then Provenance is empty).
func MetaFromSchema(s *arrow.Schema) (Meta, error) {
	m := NewMeta()
	md := s.Metadata()
	for i, k := range md.Keys() {
		if k == MetaProvenance {
			if err := json.Unmarshal([]byte(md.Values()[i]), &m.Provenance); err != nil {
				return m, fmt.Errorf("schema metadata %s: not a JSON list of stages: %v", MetaProvenance, err)
			}
			continue
		}
		m.kv[k] = md.Values()[i]
	}
	return m, nil
}

// Get returns a metadata value ("" when absent).
func (m Meta) Get(k string) string { return m.kv[k] }

// Set sets a metadata value; blis.table and blis.schema_version are managed by
// the schema constructors and cannot be set here.
func (m Meta) Set(k, v string) {
	if k == MetaTable || k == MetaSchemaVersion || k == MetaProvenance {
		return
	}
	m.kv[k] = v
}

// Table returns the blis.table value of metadata read from a schema.
func (m Meta) Table() string { return m.kv[MetaTable] }

// With returns a copy of m with stage appended to its provenance, for a tool
// that derives a new table from this one.
func (m Meta) With(stage Stage) Meta {
	n := NewMeta()
	for k, v := range m.kv {
		n.kv[k] = v
	}
	n.Provenance = append(append([]Stage(nil), m.Provenance...), stage)
	return n
}

func (m Meta) arrow(table string) *arrow.Metadata {
	keys := make([]string, 0, len(m.kv)+3)
	for k := range m.kv {
		if k != MetaTable && k != MetaSchemaVersion {
			keys = append(keys, k)
		}
	}
	keys = append(keys, MetaTable, MetaSchemaVersion)
	if len(m.Provenance) > 0 {
		keys = append(keys, MetaProvenance)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		switch k {
		case MetaTable:
			vals[i] = table
		case MetaSchemaVersion:
			vals[i] = SchemaVersion
		case MetaProvenance:
			b, _ := json.Marshal(m.Provenance) // plain structs: cannot fail
			vals[i] = string(b)
		default:
			vals[i] = m.kv[k]
		}
	}
	md := arrow.NewMetadata(keys, vals)
	return &md
}

// DescribeInput names an input for provenance, with the SHA-256 of its
// contents when it is a regular file (stdin and pipes have no digest).
func DescribeInput(path string) (Input, error) {
	if path == "" || path == "-" {
		return Input{Path: "-"}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Input{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Input{}, err
	}
	if !st.Mode().IsRegular() {
		return Input{Path: path}, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Input{}, fmt.Errorf("%s: %w", path, err)
	}
	return Input{Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Delete removes a metadata key (a tool that breaks a promise of its input,
// such as blis.sorted, drops it).
func (m Meta) Delete(k string) { delete(m.kv, k) }

// Metadata blis-sim writes on a results table: what ran, for the report's
// header (blis.sim.model, the latency model names joined by commas, is older
// and kept).
const (
	MetaSimDeployments = "blis.sim.deployments" // JSON array of SimDeployment
	MetaSimRouter      = "blis.sim.router"      // the routing policy
	// What else ran, for the summary's advice: the admission and priority
	// policies, the replica signals the routing policy weighs ("load,kv",
	// "none"; absent when it cannot say: code, trees), and how late the
	// router heard KV events (µs).
	MetaSimAdmission     = "blis.sim.admission"
	MetaSimPriority      = "blis.sim.priority"
	MetaSimRouterSignals = "blis.sim.router_signals"
	MetaSimKVEventDelay  = "blis.sim.kv_event_delay_us"
	// MetaSimKVTiers lists the run's lower KV tiers (row.TierNames), as a
	// JSON array, when some are not row.FixedTiers: the results table then
	// has a column row.TierColumn(name) for each of those.
	MetaSimKVTiers = "blis.sim.kv_tiers"
)

// SetKVTiers records the run's lower KV tiers (row.TierNames) when some
// need a column of their own; nothing otherwise.
func (m Meta) SetKVTiers(names []string) {
	if len(extraTiers(names)) == 0 {
		return
	}
	b, _ := json.Marshal(names) // strings: cannot fail
	m.Set(MetaSimKVTiers, string(b))
}

// KVTiers returns the run's lower KV tiers recorded by SetKVTiers: the
// fixed ones when none is recorded.
func (m Meta) KVTiers() ([]string, error) {
	v := m.Get(MetaSimKVTiers)
	if v == "" {
		return FixedTiers, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil || len(names) < len(FixedTiers) || !slices.Equal(names[:len(FixedTiers)], FixedTiers) {
		return nil, fmt.Errorf("schema metadata %s: expected a JSON list of tier names starting with %s, found %q", MetaSimKVTiers, strings.Join(FixedTiers, ", "), v)
	}
	return names, nil
}

// extraTiers are the names beyond the fixed tiers.
func extraTiers(names []string) []string {
	if len(names) <= len(FixedTiers) {
		return nil
	}
	return names[len(FixedTiers):]
}

// SimDeployment describes one deployment of a simulated cluster.
type SimDeployment struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	GPU      string `json:"gpu"`
	TP       int    `json:"tp"`
	Replicas int    `json:"replicas"`
	// Latency is the step-time model's name: roofline:MODEL/GPU/tpN,
	// fitted:COEFFICIENTS-FILE or linear.
	Latency  string `json:"latency"`
	KVBlocks int64  `json:"kv_blocks"`
	// Autoscaled: some pool had an autoscaler, so Replicas is the count at
	// the start and GPU-hours need the scale-events table.
	Autoscaled bool `json:"autoscaled,omitempty"`
	// GPUHourUSD is the deployment's price per GPU-hour (0: not priced).
	GPUHourUSD float64 `json:"gpu_hour_usd,omitempty"`
	// SchedulingPolicy is the engine's waiting order: fcfs or priority.
	SchedulingPolicy string `json:"scheduling_policy,omitempty"`
}

// SetSimDeployments records the deployments of a run.
func (m Meta) SetSimDeployments(d []SimDeployment) {
	b, _ := json.Marshal(d) // plain structs: cannot fail
	m.Set(MetaSimDeployments, string(b))
}

// SimDeployments returns the deployments recorded by blis-sim (nil when none were).
func (m Meta) SimDeployments() ([]SimDeployment, error) {
	v := m.Get(MetaSimDeployments)
	if v == "" {
		return nil, nil
	}
	var d []SimDeployment
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return nil, fmt.Errorf("schema metadata %s: not a JSON list of deployments: %v", MetaSimDeployments, err)
	}
	return d, nil
}
