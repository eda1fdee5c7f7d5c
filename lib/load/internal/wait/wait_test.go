package wait

import (
	"sort"
	"testing"
	"time"
)

// Until never returns early, and returns at once for a past instant or
// when stopped during a long wait.
func TestUntil(t *testing.T) {
	var late []time.Duration
	for i := 0; i < 50; i++ {
		at := time.Now().Add(time.Duration(i%7) * 700 * time.Microsecond)
		if !Until(at, nil) {
			t.Fatal("stopped without a stop channel")
		}
		d := time.Since(at)
		if d < 0 {
			t.Fatalf("returned %v early", -d)
		}
		late = append(late, d)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("late: p50 %v, max %v", late[len(late)/2], late[len(late)-1])
	stop := make(chan struct{})
	close(stop)
	start := time.Now()
	if Until(start.Add(time.Hour), stop) {
		t.Fatal("a closed stop channel did not end the wait")
	}
	if time.Since(start) > time.Second {
		t.Fatal("the stop took too long")
	}
	if !Until(start.Add(-time.Second), stop) {
		t.Fatal("an instant in the past must return true")
	}
}
