// Package coefficients embeds the shipped fitted-coefficient files
// (<model>/<gpu>-tp<N>-<engine>-<version>.yaml) so binaries find them
// without the source tree. BLIS_COEFFICIENTS points at a directory to use
// instead (see lib/latency/resolve).
package coefficients

import (
	"embed"
	"path/filepath"
)

// FS holds this directory; only <model>/*.yaml files are read from it.
//
//go:embed *
var FS embed.FS

// Shipped returns the shipped file at rel (<model>/<file>.yaml), if any.
func Shipped(rel string) ([]byte, bool) {
	b, err := FS.ReadFile(filepath.ToSlash(rel))
	return b, err == nil
}
