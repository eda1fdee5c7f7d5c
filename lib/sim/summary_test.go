package sim

import "testing"

func TestCount(t *testing.T) {
	if a, b, c := count(1, "replica"), count(4, "replica"), count(0, "request"); a != "1 replica" || b != "4 replicas" || c != "0 requests" {
		t.Errorf("%q %q %q", a, b, c)
	}
}
