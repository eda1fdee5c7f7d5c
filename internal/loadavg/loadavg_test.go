package loadavg

import (
	"runtime"
	"testing"
)

func TestRead(t *testing.T) {
	l, ok := Read()
	if runtime.GOOS == "linux" && !ok {
		t.Fatal("no load average from /proc/loadavg on Linux")
	}
	if ok && l < 0 {
		t.Fatalf("load average %g", l)
	}
	if o, over := Overloaded(); over && o <= 2*float64(runtime.NumCPU()) {
		t.Fatalf("overloaded at %g on %d cores", o, runtime.NumCPU())
	}
}
