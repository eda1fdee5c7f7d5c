// Package trace defines the Arrow tables that BLIS stages exchange (requests,
// results, steps) and streams them in and out of Arrow IPC, IPC file and
// Parquet. docs/tables.md is the user-facing description of every column.
package trace

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// SchemaVersion is bumped whenever a column is renamed, retyped or removed.
// Adding a nullable column does not bump it: readers look columns up by name.
const SchemaVersion = "1"

// Table kinds, stored under MetaTable.
const (
	TableRequests     = "requests"
	TableResults      = "results"
	TableSteps        = "steps"
	TableMeasurements = "measurements"
)

// Schema metadata keys.
const (
	MetaTable           = "blis.table"
	MetaSchemaVersion   = "blis.schema_version"
	MetaProvenance      = "blis.provenance"        // JSON array of Stage, oldest first
	MetaPrefixBlockSize = "blis.prefix_block_size" // tokens per prefix_hashes entry
	MetaStartTime       = "blis.start_time"        // RFC 3339 absolute time of arrival_us = 0
	MetaSourceFormat    = "blis.source_format"     // converter that produced the table
	MetaTimeScale       = "blis.time_scale"        // arrival times were divided by this (--speedup)
	// MetaMaxInFlight is the client's cap on requests in flight (a
	// benchmark client's --max-concurrency, inference-perf's workers ×
	// worker_max_concurrency): a request whose time has come waits for a
	// free slot. Absent: no cap.
	MetaMaxInFlight = "blis.max_in_flight"
	// MetaPrefixUnique "true" promises that no two rows share their first
	// prefix_hashes entry, so no request can hit another's cached blocks
	// (blis-synth writes it when its spec shares no content). blis-sim
	// then keeps cache records for a request's first block only, and fails
	// if two requests do share one. Absent: no promise.
	MetaPrefixUnique = "blis.prefix_unique"
)

var (
	dictString = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	listString = arrow.ListOf(arrow.BinaryTypes.String)
	listUint64 = arrow.ListOf(arrow.PrimitiveTypes.Uint64)
)

func field(name string, t arrow.DataType, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: nullable}
}

// requestFields is the column order of the requests table; the results table
// starts with the same columns.
var requestFields = []arrow.Field{
	field(ColRequestID, arrow.BinaryTypes.String, false),
	field(ColArrivalUS, arrow.PrimitiveTypes.Int64, true),
	field(ColDependsOn, listString, true),
	field(ColDelayUS, arrow.PrimitiveTypes.Int64, false),
	field(ColKind, dictString, false),
	field(ColInputTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColOutputTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColPrefixHashes, listUint64, true),
	field(ColSessionID, arrow.BinaryTypes.String, true),
	field(ColTenantID, dictString, true),
	field(ColSLOClass, dictString, true),
	field(ColModel, dictString, true),
	field(ColPriority, arrow.PrimitiveTypes.Int32, false),
	field(ColStepID, dictString, true),
	field(ColLoopIteration, arrow.PrimitiveTypes.Int32, false),
	field(ColStreaming, arrow.FixedWidthTypes.Boolean, false),
	field(ColSourceStatus, dictString, true),
	field(ColRecordedTTFTUS, arrow.PrimitiveTypes.Int64, true),
	field(ColRecordedE2EUS, arrow.PrimitiveTypes.Int64, true),
	field(ColRecordedITLUS, arrow.PrimitiveTypes.Int64, true),
	field(ColSourceRow, arrow.PrimitiveTypes.Int64, false),
	field(ColTimeoutUS, arrow.PrimitiveTypes.Int64, true),
	field(ColRequestType, dictString, true),
	field(ColNumImages, arrow.PrimitiveTypes.Int32, false),
	field(ColStage, dictString, true),
	field(ColLoRA, dictString, true),
}

var resultOnlyFields = []arrow.Field{
	field(ColStatus, dictString, false),
	field(ColDropReason, dictString, true),
	field(ColInstanceID, arrow.PrimitiveTypes.Int32, true),
	field(ColAdmittedUS, arrow.PrimitiveTypes.Int64, true),
	field(ColRoutedUS, arrow.PrimitiveTypes.Int64, true),
	field(ColEnqueuedUS, arrow.PrimitiveTypes.Int64, true),
	field(ColFirstScheduledUS, arrow.PrimitiveTypes.Int64, true),
	field(ColFirstTokenUS, arrow.PrimitiveTypes.Int64, true),
	field(ColFinishedUS, arrow.PrimitiveTypes.Int64, true),
	field(ColTTFTUS, arrow.PrimitiveTypes.Int64, true),
	field(ColE2EUS, arrow.PrimitiveTypes.Int64, true),
	field(ColTPOTUS, arrow.PrimitiveTypes.Int64, true),
	field(ColPreemptions, arrow.PrimitiveTypes.Int32, false),
	field(ColCachedTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColGeneratedTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColDeployment, dictString, true),
	field(ColReplicaID, dictString, true),
	field(ColCachedTokensGPU, arrow.PrimitiveTypes.Int32, false),
	field(ColCachedTokensCPU, arrow.PrimitiveTypes.Int32, false),
	field(ColCachedTokensStorage, arrow.PrimitiveTypes.Int32, false),
	field(ColKVReloadUS, arrow.PrimitiveTypes.Int64, false),
	field(ColKVThrashTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColPrefillReplica, dictString, true),
	field(ColDecodeReplica, dictString, true),
	field(ColKVTransferUS, arrow.PrimitiveTypes.Int64, true),
	field(ColKVTransferWaitUS, arrow.PrimitiveTypes.Int64, true),
	field(ColKVTransferBytes, arrow.PrimitiveTypes.Int64, false),
	field(ColClientWaitUS, arrow.PrimitiveTypes.Int64, true),
}

var stepFields = []arrow.Field{
	field(ColInstanceID, arrow.PrimitiveTypes.Int32, false),
	field(ColStepIndex, arrow.PrimitiveTypes.Int64, false),
	field(ColStartUS, arrow.PrimitiveTypes.Int64, false),
	field(ColDurationUS, arrow.PrimitiveTypes.Int64, false),
	field(ColBatchSize, arrow.PrimitiveTypes.Int32, false),
	field(ColPrefillTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColDecodeTokens, arrow.PrimitiveTypes.Int32, false),
	field(ColKVBlocksUsed, arrow.PrimitiveTypes.Int32, false),
	field(ColKVBlocksTotal, arrow.PrimitiveTypes.Int32, false),
	field(ColWaiting, arrow.PrimitiveTypes.Int32, false),
	field(ColRunning, arrow.PrimitiveTypes.Int32, false),
	field(ColPreempted, arrow.PrimitiveTypes.Int32, false),
	field(ColReplicaID, dictString, false),
	field(ColRole, dictString, false),
	field(ColKVOffloads, arrow.PrimitiveTypes.Int32, false),
	field(ColKVReloads, arrow.PrimitiveTypes.Int32, false),
}

// RequestsSchema returns the requests schema carrying md (which must include
// MetaTable; see NewMeta).
func RequestsSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(requestFields, md.arrow(TableRequests))
}

// ResultsSchema returns the results schema: every request column, then the
// simulation outcome.
func ResultsSchema(md Meta) *arrow.Schema {
	fs := make([]arrow.Field, 0, len(requestFields)+len(resultOnlyFields))
	fs = append(fs, requestFields...)
	fs = append(fs, resultOnlyFields...)
	// A run's lower tiers beyond cpu and storage add a column each.
	if names, err := md.KVTiers(); err == nil {
		for _, n := range extraTiers(names) {
			fs = append(fs, field(TierColumn(n), arrow.PrimitiveTypes.Int32, false))
		}
	}
	return arrow.NewSchema(fs, md.arrow(TableResults))
}

// StepsSchema returns the per-step table schema.
func StepsSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(stepFields, md.arrow(TableSteps))
}

// RequiredRequestColumns must be present in any table read as requests.
// Every other request column is optional and defaults as documented.
var RequiredRequestColumns = []string{ColRequestID, ColArrivalUS, ColInputTokens, ColOutputTokens}
