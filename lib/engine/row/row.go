// Package row holds what goes into the engine and what comes out of it, as
// plain Go values: a request (a row of the requests table), its result, a
// step, a scale event, an anomaly, and the column names errors quote. It
// imports no Arrow: lib/trace converts these rows to and from Arrow tables
// at the edge, so the engine's rooms depend on this vocabulary only.
package row

import (
	"fmt"
	"math"
	"slices"
)

// MetaSorted is the table metadata key whose value "arrival" promises that
// root rows (non-null arrival_us) come in nondecreasing arrival order and
// every dependent row comes after the root of its session and before any
// later-arriving root, so a consumer can stream the table. Writers that
// cannot promise it leave it unset.
const MetaSorted = "blis.sorted"

// Metadata of a run whose decisions came from a policy bundle (the
// bundle's Provenance, beside .parent_id, .mutations, ...):
// blis.policy.stages lists the stages the bundle gives, in pipeline order,
// joined by PolicyStageSep ("routing starlark prefix-load.star; admission
// queue-limit"); blis.policy.stage_kinds is a JSON object of the stages
// and their kinds ({"routing": "starlark"}), which the summary's advice
// reads so as never to contradict the bundle.
const (
	MetaPolicyID         = "blis.policy.id"
	MetaPolicyGeneration = "blis.policy.generation"
	MetaPolicyStages     = "blis.policy.stages"
	MetaPolicyStageKinds = "blis.policy.stage_kinds"
	PolicyStageSep       = "; "
)

// Null marks an absent int64 value (an SQL NULL in the Arrow column).
const Null int64 = math.MinInt64

// Request is one row of the requests table. String fields are "" when null;
// int64 fields documented as nullable hold Null when absent.
type Request struct {
	ID             string
	ArrivalUS      int64 // Null for a request that waits on DependsOn
	DependsOn      []string
	DelayUS        int64
	Kind           string // KindLLM or KindTool
	InputTokens    int32
	OutputTokens   int32
	PrefixHashes   []uint64
	SessionID      string
	TenantID       string
	SLOClass       string
	Model          string
	Priority       int32
	StepID         string
	LoopIteration  int32
	Streaming      bool
	SourceStatus   string // "" or SourceFailed
	RecordedTTFTUS int64  // Null when the source recorded none
	RecordedE2EUS  int64
	RecordedITLUS  int64 // mean inter-token latency
	SourceRow      int64
	TimeoutUS      int64  // client gives up this long after arrival; 0 = never (null in the table)
	RequestType    string // "" (unknown) or one of RequestTypes
	NumImages      int32  // images in the prompt; their tokens are counted in InputTokens
	Stage          string // load stage of a staged benchmark ("" when none)
	LoRA           string // LoRA adapter the request is served with ("" = the base model)
}

// NewRequest returns a request with the documented defaults: an LLM call,
// streaming, no recorded latencies.
func NewRequest(id string) Request {
	return Request{ID: id, Kind: KindLLM, Streaming: true, ArrivalUS: Null,
		RecordedTTFTUS: Null, RecordedE2EUS: Null, RecordedITLUS: Null}
}

// Validate checks one row's values in isolation (graph checks such as
// dangling depends_on belong to the consumer that sees the whole table).
func (r *Request) Validate() error {
	switch {
	case r.ID == "":
		return fmt.Errorf("column %s: expected a non-empty id, found \"\"", ColRequestID)
	case r.Kind != KindLLM && r.Kind != KindTool:
		return fmt.Errorf("column %s: expected %q or %q, found %q", ColKind, KindLLM, KindTool, r.Kind)
	case r.InputTokens < 0:
		return fmt.Errorf("column %s: expected >= 0, found %d", ColInputTokens, r.InputTokens)
	case r.OutputTokens < 0:
		return fmt.Errorf("column %s: expected >= 0, found %d", ColOutputTokens, r.OutputTokens)
	case r.DelayUS < 0:
		return fmt.Errorf("column %s: expected >= 0, found %d", ColDelayUS, r.DelayUS)
	case r.ArrivalUS == Null && len(r.DependsOn) == 0:
		return fmt.Errorf("column %s: expected a time for a request with no %s, found null", ColArrivalUS, ColDependsOn)
	case r.ArrivalUS != Null && r.ArrivalUS < 0:
		return fmt.Errorf("column %s: expected >= 0, found %d", ColArrivalUS, r.ArrivalUS)
	case r.Kind == KindLLM && r.InputTokens == 0 && r.SourceStatus == "":
		return fmt.Errorf("column %s: expected > 0 for an llm request, found 0", ColInputTokens)
	}
	for _, v := range []struct {
		col string
		v   int64
	}{{ColRecordedTTFTUS, r.RecordedTTFTUS}, {ColRecordedE2EUS, r.RecordedE2EUS}, {ColRecordedITLUS, r.RecordedITLUS}} {
		if v.v != Null && v.v < 0 {
			return fmt.Errorf("column %s: expected >= 0, found %d", v.col, v.v)
		}
	}
	if r.TimeoutUS < 0 {
		return fmt.Errorf("column %s: expected > 0 (or null for no timeout), found %d", ColTimeoutUS, r.TimeoutUS)
	}
	if r.NumImages < 0 {
		return fmt.Errorf("column %s: expected >= 0, found %d", ColNumImages, r.NumImages)
	}
	return nil
}

// RowError names the table row (1-based), request and source row of a bad value.
type RowError struct {
	Path      string
	Row       int64
	RequestID string
	SourceRow int64
	Err       error
}

func (e *RowError) Error() string {
	s := fmt.Sprintf("%s: row %d", e.Path, e.Row)
	if e.RequestID != "" {
		s += fmt.Sprintf(" (request %s", e.RequestID)
		if e.SourceRow > 0 {
			s += fmt.Sprintf(", source row %d", e.SourceRow)
		}
		s += ")"
	}
	return s + ": " + e.Err.Error()
}

func (e *RowError) Unwrap() error { return e.Err }

// BadInput marks a bad row as bad input (the tools' exit status 2).
func (e *RowError) BadInput() bool { return true }

// Request column names.
const (
	ColRequestID      = "request_id"
	ColArrivalUS      = "arrival_us"
	ColDependsOn      = "depends_on"
	ColDelayUS        = "delay_us"
	ColKind           = "kind"
	ColInputTokens    = "input_tokens"
	ColOutputTokens   = "output_tokens"
	ColPrefixHashes   = "prefix_hashes"
	ColSessionID      = "session_id"
	ColTenantID       = "tenant_id"
	ColSLOClass       = "slo_class"
	ColModel          = "model"
	ColPriority       = "priority"
	ColStepID         = "step_id"
	ColLoopIteration  = "loop_iteration"
	ColStreaming      = "streaming"
	ColSourceStatus   = "source_status"
	ColRecordedTTFTUS = "recorded_ttft_us"
	ColRecordedE2EUS  = "recorded_e2e_us"
	ColRecordedITLUS  = "recorded_itl_us"
	ColSourceRow      = "source_row"
	ColTimeoutUS      = "timeout_us"
	ColRequestType    = "request_type" // completion, chat, agentic, reasoning, multimodal
	ColNumImages      = "num_images"   // images sent with the prompt (their tokens are in input_tokens)
	ColStage          = "stage"        // load stage of a staged benchmark (inference-perf's stage_N)
	ColLoRA           = "lora"         // LoRA adapter (vLLM's model name of a --lora-modules entry); null = the base model
)

// Request types (request_type). Null means unknown.
const (
	TypeCompletion = "completion"
	TypeChat       = "chat"
	TypeAgentic    = "agentic"
	TypeReasoning  = "reasoning"
	TypeMultimodal = "multimodal"
)

// RequestTypes lists the request types in documentation order.
var RequestTypes = []string{TypeCompletion, TypeChat, TypeAgentic, TypeReasoning, TypeMultimodal}

// Result-only column names.
const (
	ColStatus           = "status"
	ColDropReason       = "drop_reason"
	ColInstanceID       = "instance_id"
	ColAdmittedUS       = "admitted_us"
	ColRoutedUS         = "routed_us"
	ColEnqueuedUS       = "enqueued_us"
	ColFirstScheduledUS = "first_scheduled_us"
	ColFirstTokenUS     = "first_token_us"
	ColFinishedUS       = "finished_us"
	ColTTFTUS           = "ttft_us"
	ColE2EUS            = "e2e_us"
	ColTPOTUS           = "tpot_us"
	ColPreemptions      = "preemptions"
	ColCachedTokens     = "cached_tokens"
	ColGeneratedTokens  = "generated_tokens"
	ColDeployment       = "deployment"
	ColReplicaID        = "replica_id"
	// Tiered KV and disaggregated serving.
	ColCachedTokensGPU     = "cached_tokens_gpu"
	ColCachedTokensCPU     = "cached_tokens_cpu"
	ColCachedTokensStorage = "cached_tokens_storage"
	ColKVReloadUS          = "kv_reload_us"
	ColKVThrashTokens      = "kv_thrash_tokens"
	ColPrefillReplica      = "prefill_replica"
	ColDecodeReplica       = "decode_replica"
	ColKVTransferUS        = "kv_transfer_us"
	ColKVTransferWaitUS    = "kv_transfer_wait_us"
	ColKVTransferBytes     = "kv_transfer_bytes"
	// The client's in-flight cap (blis.max_in_flight).
	ColClientWaitUS = "client_wait_us"
)

// Step column names.
const (
	ColStepIndex     = "step_index"
	ColStartUS       = "start_us"
	ColDurationUS    = "duration_us"
	ColBatchSize     = "batch_size"
	ColPrefillTokens = "prefill_tokens"
	ColDecodeTokens  = "decode_tokens"
	ColKVBlocksUsed  = "kv_blocks_used"
	ColKVBlocksTotal = "kv_blocks_total"
	ColWaiting       = "waiting"
	ColRunning       = "running"
	ColPreempted     = "preempted"
	ColRole          = "role"
	ColKVOffloads    = "kv_offloaded_blocks"
	ColKVReloads     = "kv_reloaded_blocks"
)

// Request kinds.
const (
	KindLLM  = "llm"
	KindTool = "tool"
)

// Source status of a request in its original trace. Null means it succeeded.
const SourceFailed = "failed"

// Result statuses.
const (
	StatusCompleted    = "completed"
	StatusRejected     = "rejected"      // refused by admission control
	StatusDropped      = "dropped"       // can never fit (see drop_reason)
	StatusTimedOut     = "timed_out"     // gave up waiting
	StatusUnfinished   = "unfinished"    // still queued or running at the horizon
	StatusSourceFailed = "source_failed" // failed in the source trace; not simulated
	// StatusFailed: the server or the connection failed the request
	// (blis-load only: HTTP errors, resets, cut streams).
	StatusFailed = "failed"
)

// Result is one row of the results table: the request as it was read, then
// what happened to it. Time fields are absolute simulated microseconds and
// hold Null when the request never reached that point.
type Result struct {
	Request
	Status           string
	DropReason       string // why a request was dropped or rejected ("" otherwise)
	InstanceID       int32  // -1 when never routed
	AdmittedUS       int64  // passed admission control
	RoutedUS         int64  // assigned to an instance
	EnqueuedUS       int64  // entered the instance's waiting queue (after alpha overhead)
	FirstScheduledUS int64  // first step that worked on it began
	FirstTokenUS     int64  // first output token emitted
	FinishedUS       int64  // last output token emitted (or tool timer fired)
	TTFTUS           int64  // FirstTokenUS - arrival
	E2EUS            int64  // FinishedUS - arrival
	TPOTUS           int64  // mean gap between output tokens after the first
	Preemptions      int32
	CachedTokens     int32  // prompt tokens served from the prefix cache on first scheduling
	GeneratedTokens  int32  // output tokens emitted (equals OutputTokens when completed)
	Deployment       string // the deployment that served it ("" when never routed)
	ReplicaID        string // "<deployment>/<n>" ("" when never routed)

	// Tiered KV: cached_tokens split by the tier the hit came from, the
	// time spent loading from lower tiers, and reloaded tokens whose blocks
	// were thrashing (reloaded, evicted and reloaded within 1 s).
	CachedTokensGPU int32
	// CachedTokensTier is cached_tokens from each lower tier, by the run's
	// tier names (TierNames: cpu and storage first); nil without tiers.
	CachedTokensTier []int32
	KVReloadUS       int64
	KVThrashTokens   int32
	// Disaggregated serving ("" and Null otherwise): where it prefilled and
	// decoded, the hand-off's time (prefill end to the last KV byte's
	// arrival: with granularity chunk or stream, the part of the transfer
	// not hidden behind the prefill), the part of it spent waiting (decode
	// blocks, link queue) before the last piece was sent, and the bytes moved.
	PrefillReplica, DecodeReplica  string
	KVTransferUS, KVTransferWaitUS int64
	KVTransferBytes                int64
	// ClientWaitUS is how long the request waited for one of the client's
	// in-flight slots (blis.max_in_flight) after its time had come; its
	// arrival_us is when it was sent. Null when the client has no cap.
	ClientWaitUS int64
}

// NewResult returns a result for req with every outcome field absent.
func NewResult(req Request) Result {
	return Result{Request: req, InstanceID: -1, AdmittedUS: Null, RoutedUS: Null, EnqueuedUS: Null,
		FirstScheduledUS: Null, FirstTokenUS: Null, FinishedUS: Null, TTFTUS: Null, E2EUS: Null, TPOTUS: Null,
		KVTransferUS: Null, KVTransferWaitUS: Null, ClientWaitUS: Null}
}

// Step is one row of the steps table: one engine iteration on one instance.
type Step struct {
	InstanceID    int32
	StepIndex     int64
	StartUS       int64
	DurationUS    int64
	BatchSize     int32
	PrefillTokens int32
	DecodeTokens  int32
	KVBlocksUsed  int32
	KVBlocksTotal int32
	Waiting       int32
	Running       int32
	Preempted     int32 // requests preempted while forming this step
	ReplicaID     string
	Role          string // the replica's pool role: monolithic, prefill or decode
	// Lower KV tiers: blocks copied into a lower tier, and loaded from
	// one to the GPU, on this instance since its previous step row.
	KVOffloads, KVReloads int32
}

// Scale-event actions. up and down are autoscaler decisions; the others
// are one replica's lifecycle (start: present at time 0; ready: done
// provisioning and loading weights; serving: warm; stopped: gone) and
// end, one row per pool when the run ends.
const (
	ScaleUp      = "up"
	ScaleDown    = "down"
	ScaleStart   = "start"
	ScaleReady   = "ready"
	ScaleServing = "serving"
	ScaleStopped = "stopped"
	ScaleEnd     = "end"
)

// ScaleEvent is one row of the scale-events table. Float metrics are NaN
// and integer ones Null (math.MinInt64) when they do not apply.
type ScaleEvent struct {
	TimeUS     int64
	Deployment string
	Pool       int32
	Action     string
	ReplicaID  string // lifecycle rows
	From, To   int32  // decisions: the pool's replica count before and after
	Reason     string
	// Replicas and Ready are the pool's billed replicas (every state but
	// stopped) and its serving or warming replicas after the event.
	Replicas, Ready int32
	GPUsPerReplica  int32
	GPUHourUSD      float64
	// Metrics the policy saw (decisions only).
	QueueDepth, Running, Utilization, KVUtilization, RequestRate, SLOAttainment float64
	TTFTP50US, TTFTP99US, E2EP50US, E2EP99US                                    int64
	Pending                                                                     int32
	// ProvisioningUS is the longest provisioning + weight-load delay of the
	// replicas an up decision started (lifecycle rows: the replica's);
	// WarmEndUS is when the last of them is warm.
	ProvisioningUS, WarmEndUS int64
}

// Anomaly types (the type column).
const (
	AnomalyPriorityInversion = "priority_inversion"
	AnomalySLOViolation      = "slo_violation"
	AnomalyShadowDivergence  = "shadow_divergence"
	AnomalyPreemptionStorm   = "preemption_storm"
	AnomalyHeadOfLine        = "head_of_line_blocking"
	AnomalyCacheThrashing    = "cache_thrashing"   // tiered KV (issue 13)
	AnomalyScaleOscillation  = "scale_oscillation" // autoscaling (issue 14)
	AnomalyPDBackpressure    = "pd_backpressure"   // prefill/decode disaggregation (issue 13)
)

// AnomalyTypes lists every type, in documentation order.
var AnomalyTypes = []string{AnomalyPriorityInversion, AnomalySLOViolation, AnomalyShadowDivergence,
	AnomalyPreemptionStorm, AnomalyHeadOfLine, AnomalyCacheThrashing, AnomalyScaleOscillation, AnomalyPDBackpressure}

// Anomaly is one row of the anomalies table.
type Anomaly struct {
	Seq         int64
	Type        string
	TimeUS      int64 // when it was detected (or began)
	EndUS       int64 // end of its time window (= TimeUS for an instant)
	Severity    string
	Magnitude   float64 // the measured quantity, unit by type (docs/tables.md); NaN = none
	ReplicaID   string
	Description string
	Requests    []string
}

// FixedTiers are the lower KV tiers whose cached tokens have a column in
// every results table (cached_tokens_cpu, cached_tokens_storage); a run
// with other tiers adds a column TierColumn(name) for each.
var FixedTiers = []string{"cpu", "storage"}

// TierColumn is the results column of the prompt tokens served from lower
// tier name.
func TierColumn(name string) string { return "cached_tokens_" + name }

// TierNames is a run's lower-tier names, the index of Result's
// CachedTokensTier: FixedTiers, then the other names the deployments give,
// in order of first appearance; nil when no deployment has lower tiers.
func TierNames(perDeployment [][]string) []string {
	var out []string
	for _, names := range perDeployment {
		for _, n := range names {
			if out == nil {
				out = append([]string(nil), FixedTiers...)
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
