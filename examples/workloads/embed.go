// Package workloads embeds the example workload specs of this folder in the
// binaries: blis-synth --example NAME runs NAME.yaml, --list-examples lists
// them. A new example is a new file here.
package workloads

import "embed"

// FS holds every *.yaml of this folder.
//
//go:embed *.yaml
var FS embed.FS
