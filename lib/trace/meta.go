package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
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

// version and commit may be set at link time (make build sets commit, as
// git names it: the 12-digit revision, -dirty when the tree has changes,
// untracked files included, as Go's own vcs.modified counts them):
// go build -ldflags "-X github.com/blis-sim/blis/lib/trace.version=1.2.3".
var version, commit string

// Version is the toolkit version printed by --version and recorded in
// provenance, one string per commit however the binary was built: the
// link-time version, else a release tag from the build info (`go install
// …@v1.2.3`), else BaseVersion with the commit: the revision Go stamps in
// a git checkout (go build, go run) or the link-time one (make build, and
// builds with -buildvcs=false), -dirty when the tree was modified. Go's
// pseudo-versions (v0.0.0-2026…-abcdef012345) are not used: they would
// give the same commit another name than make build does.
var Version = func() string {
	bi, _ := debug.ReadBuildInfo()
	return resolveVersion(version, commit, bi)
}()

// pseudoVersion matches Go's pseudo-versions (vX.Y.Z-[pre.]0.yyyymmddhhmmss-
// revision, or vX.0.0-yyyymmddhhmmss-revision), +dirty or not.
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-[0-9a-f]{12}(\+dirty)?$`)

func resolveVersion(ldVersion, ldCommit string, bi *debug.BuildInfo) string {
	if ldVersion != "" {
		return ldVersion
	}
	rev, dirty := ldCommit, false
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudoVersion.MatchString(v) && !strings.HasSuffix(v, "+dirty") {
			return v
		}
		vcsRev := ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				vcsRev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = true
			}
		}
		if vcsRev != "" {
			rev = vcsRev
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
func DescribeInput(path string) (Input, error) { return DescribeInputUntil(path, nil) }

// ErrStopped is DescribeInputUntil's error when stop was closed first.
var ErrStopped = errors.New("stopped")

// DescribeInputUntil is DescribeInput that gives up (ErrStopped) once stop
// is closed: a tool hashing its input beside its run stops with the run.
func DescribeInputUntil(path string, stop <-chan struct{}) (Input, error) {
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
	var r io.Reader = f
	if stop != nil {
		r = &stoppable{r: f, stop: stop}
	}
	if _, err := io.CopyBuffer(h, r, make([]byte, 256<<10)); err != nil {
		if errors.Is(err, ErrStopped) {
			return Input{}, err
		}
		return Input{}, fmt.Errorf("%s: %w", path, err)
	}
	return Input{Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// stoppable reads r until stop is closed.
type stoppable struct {
	r    io.Reader
	stop <-chan struct{}
}

func (s *stoppable) Read(p []byte) (int, error) {
	select {
	case <-s.stop:
		return 0, ErrStopped
	default:
		return s.r.Read(p)
	}
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

// PolicyLabel names the run's policy bundle for summaries and reports: its
// id, generation and stages ("prefix-load generation 2: routing starlark
// prefix-load.star"); "" when no bundle made the run's decisions.
func (m Meta) PolicyLabel() string {
	id, stages := m.Get(MetaPolicyID), m.Get(MetaPolicyStages)
	if id == "" && stages == "" && m.Get(MetaPolicyGeneration) == "" {
		return ""
	}
	if id == "" {
		id = "(no id)"
	}
	s := id
	if g := m.Get(MetaPolicyGeneration); g != "" {
		s += " generation " + g
	}
	if stages == "" {
		stages = "no stages"
	}
	return s + ": " + stages
}

// RouterLabel says what routed the run's requests: the policy bundle's
// routing stage when the bundle has one ("policy prefix-load: starlark
// prefix-load.star"), else blis.sim.router (the built-in router); "" when
// neither is recorded. blis-sim's summary and blis-report's Run
// configuration both use it, so that they never disagree.
func (m Meta) RouterLabel() string {
	for _, st := range strings.Split(m.Get(MetaPolicyStages), PolicyStageSep) {
		if how, ok := strings.CutPrefix(st, "routing "); ok {
			id := m.Get(MetaPolicyID)
			if id == "" {
				id = "(no id)"
			}
			return "policy " + id + ": " + how
		}
	}
	return m.Get(MetaSimRouter)
}

// SimDeployment describes one deployment of a simulated cluster.
type SimDeployment struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	GPU   string `json:"gpu"`
	TP    int    `json:"tp"`
	// PP is the pipeline-parallel size (absent: 1): a replica has TP × PP GPUs.
	PP       int `json:"pp,omitempty"`
	Replicas int `json:"replicas"`
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
	// Pools describe each pool when some pool runs on hardware of its own
	// (heterogeneous P/D): GPU-hours and cost are then summed per pool.
	Pools []SimPool `json:"pools,omitempty"`
}

// SimPool is one pool of a deployment whose pools differ in hardware.
type SimPool struct {
	Role       string  `json:"role"`
	GPU        string  `json:"gpu"`
	TP         int     `json:"tp"`
	PP         int     `json:"pp,omitempty"` // absent: 1
	Replicas   int     `json:"replicas"`
	GPUHourUSD float64 `json:"gpu_hour_usd,omitempty"`
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

// MaxInFlight returns the client's cap on requests in flight
// (MetaMaxInFlight), 0 when the table has none.
func (m Meta) MaxInFlight() (int, error) {
	v := m.kv[MetaMaxInFlight]
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("schema metadata %s: expected a positive integer, found %q", MetaMaxInFlight, v)
	}
	return n, nil
}

// PrefixUnique is the table's blis.prefix_unique promise (false when
// absent).
func (m Meta) PrefixUnique() (bool, error) {
	switch v := m.kv[MetaPrefixUnique]; v {
	case "":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("schema metadata %s: expected true (or no key), found %q", MetaPrefixUnique, v)
	}
}
