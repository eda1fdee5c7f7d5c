// Package loadavg tells wall-clock tests whether the machine is loaded past
// the point where their timings mean anything (CI shares 2 cores).
package loadavg

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Read returns the 1-minute load average (Linux; false elsewhere).
func Read() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// Overloaded returns the load average and whether it is above twice the
// machine's cores.
func Overloaded() (float64, bool) {
	l, ok := Read()
	return l, ok && l > 2*float64(runtime.NumCPU())
}
