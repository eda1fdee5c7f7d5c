package trace

// The engine's rows (lib/engine/row), named here too: a table's reader and
// writer speak of the rows they convert. Generated from lib/engine/row by
// hand-run `go run` of a one-off script; keep in step with it.

import "github.com/blis-sim/blis/lib/engine/row"

type (
	Request    = row.Request
	RowError   = row.RowError
	Result     = row.Result
	Step       = row.Step
	ScaleEvent = row.ScaleEvent
	Anomaly    = row.Anomaly
)

const (
	MetaSorted               = row.MetaSorted
	MetaPolicyID             = row.MetaPolicyID
	MetaPolicyGeneration     = row.MetaPolicyGeneration
	MetaPolicyStages         = row.MetaPolicyStages
	PolicyStageSep           = row.PolicyStageSep
	Null                     = row.Null
	ColRequestID             = row.ColRequestID
	ColArrivalUS             = row.ColArrivalUS
	ColDependsOn             = row.ColDependsOn
	ColDelayUS               = row.ColDelayUS
	ColKind                  = row.ColKind
	ColInputTokens           = row.ColInputTokens
	ColOutputTokens          = row.ColOutputTokens
	ColPrefixHashes          = row.ColPrefixHashes
	ColSessionID             = row.ColSessionID
	ColTenantID              = row.ColTenantID
	ColSLOClass              = row.ColSLOClass
	ColModel                 = row.ColModel
	ColPriority              = row.ColPriority
	ColStepID                = row.ColStepID
	ColLoopIteration         = row.ColLoopIteration
	ColStreaming             = row.ColStreaming
	ColSourceStatus          = row.ColSourceStatus
	ColRecordedTTFTUS        = row.ColRecordedTTFTUS
	ColRecordedE2EUS         = row.ColRecordedE2EUS
	ColRecordedITLUS         = row.ColRecordedITLUS
	ColSourceRow             = row.ColSourceRow
	ColTimeoutUS             = row.ColTimeoutUS
	ColRequestType           = row.ColRequestType
	ColNumImages             = row.ColNumImages
	ColStage                 = row.ColStage
	ColLoRA                  = row.ColLoRA
	TypeCompletion           = row.TypeCompletion
	TypeChat                 = row.TypeChat
	TypeAgentic              = row.TypeAgentic
	TypeReasoning            = row.TypeReasoning
	TypeMultimodal           = row.TypeMultimodal
	ColStatus                = row.ColStatus
	ColDropReason            = row.ColDropReason
	ColInstanceID            = row.ColInstanceID
	ColAdmittedUS            = row.ColAdmittedUS
	ColRoutedUS              = row.ColRoutedUS
	ColEnqueuedUS            = row.ColEnqueuedUS
	ColFirstScheduledUS      = row.ColFirstScheduledUS
	ColFirstTokenUS          = row.ColFirstTokenUS
	ColFinishedUS            = row.ColFinishedUS
	ColTTFTUS                = row.ColTTFTUS
	ColE2EUS                 = row.ColE2EUS
	ColTPOTUS                = row.ColTPOTUS
	ColPreemptions           = row.ColPreemptions
	ColCachedTokens          = row.ColCachedTokens
	ColGeneratedTokens       = row.ColGeneratedTokens
	ColDeployment            = row.ColDeployment
	ColReplicaID             = row.ColReplicaID
	ColCachedTokensGPU       = row.ColCachedTokensGPU
	ColCachedTokensCPU       = row.ColCachedTokensCPU
	ColCachedTokensStorage   = row.ColCachedTokensStorage
	ColKVReloadUS            = row.ColKVReloadUS
	ColKVThrashTokens        = row.ColKVThrashTokens
	ColPrefillReplica        = row.ColPrefillReplica
	ColDecodeReplica         = row.ColDecodeReplica
	ColKVTransferUS          = row.ColKVTransferUS
	ColKVTransferWaitUS      = row.ColKVTransferWaitUS
	ColKVTransferBytes       = row.ColKVTransferBytes
	ColClientWaitUS          = row.ColClientWaitUS
	ColStepIndex             = row.ColStepIndex
	ColStartUS               = row.ColStartUS
	ColDurationUS            = row.ColDurationUS
	ColBatchSize             = row.ColBatchSize
	ColPrefillTokens         = row.ColPrefillTokens
	ColDecodeTokens          = row.ColDecodeTokens
	ColKVBlocksUsed          = row.ColKVBlocksUsed
	ColKVBlocksTotal         = row.ColKVBlocksTotal
	ColWaiting               = row.ColWaiting
	ColRunning               = row.ColRunning
	ColPreempted             = row.ColPreempted
	ColRole                  = row.ColRole
	ColKVOffloads            = row.ColKVOffloads
	ColKVReloads             = row.ColKVReloads
	KindLLM                  = row.KindLLM
	KindTool                 = row.KindTool
	SourceFailed             = row.SourceFailed
	StatusCompleted          = row.StatusCompleted
	StatusRejected           = row.StatusRejected
	StatusDropped            = row.StatusDropped
	StatusTimedOut           = row.StatusTimedOut
	StatusUnfinished         = row.StatusUnfinished
	StatusSourceFailed       = row.StatusSourceFailed
	StatusFailed             = row.StatusFailed
	ScaleUp                  = row.ScaleUp
	ScaleDown                = row.ScaleDown
	ScaleStart               = row.ScaleStart
	ScaleReady               = row.ScaleReady
	ScaleServing             = row.ScaleServing
	ScaleStopped             = row.ScaleStopped
	ScaleEnd                 = row.ScaleEnd
	AnomalyPriorityInversion = row.AnomalyPriorityInversion
	AnomalySLOViolation      = row.AnomalySLOViolation
	AnomalyShadowDivergence  = row.AnomalyShadowDivergence
	AnomalyPreemptionStorm   = row.AnomalyPreemptionStorm
	AnomalyHeadOfLine        = row.AnomalyHeadOfLine
	AnomalyCacheThrashing    = row.AnomalyCacheThrashing
	AnomalyScaleOscillation  = row.AnomalyScaleOscillation
	AnomalyPDBackpressure    = row.AnomalyPDBackpressure
)

var (
	RequestTypes = row.RequestTypes
	AnomalyTypes = row.AnomalyTypes
	FixedTiers   = row.FixedTiers
	NewRequest   = row.NewRequest
	NewResult    = row.NewResult
	TierColumn   = row.TierColumn
	TierNames    = row.TierNames
)
