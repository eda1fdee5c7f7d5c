//go:build race

package load

// The race detector slows everything tenfold: timing precision is not
// measurable under it.
const raceEnabled = true
