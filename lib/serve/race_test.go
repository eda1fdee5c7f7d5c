//go:build race

package serve

// The race detector slows everything tenfold: timing is not measurable
// under it.
const raceEnabled = true
