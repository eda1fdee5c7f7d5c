// Package coefficients embeds the shipped fitted-coefficient files
// (<model>/<gpu>-tp<N>-<engine>-<version>.yaml) so binaries find them
// without the source tree. BLIS_COEFFICIENTS points at a directory to use
// instead (see lib/latency/resolve).
package coefficients

import "embed"

// FS holds this directory; only <model>/*.yaml files are read from it.
//
//go:embed *
var FS embed.FS
