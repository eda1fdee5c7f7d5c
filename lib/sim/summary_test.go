package sim

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

func TestCount(t *testing.T) {
	if a, b, c := count(1, "replica"), count(4, "replica"), count(0, "request"); a != "1 replica" || b != "4 replicas" || c != "0 requests" {
		t.Errorf("%q %q %q", a, b, c)
	}
}

func TestOnHardware(t *testing.T) {
	for _, tc := range []struct {
		pools []config.Pool
		want  string
	}{
		{[]config.Pool{{Role: "monolithic", Replicas: 2}}, "on h100 tp4"},
		{[]config.Pool{{Role: "prefill", Replicas: 2, GPU: "h200", TP: 2}, {Role: "decode", Replicas: 3}},
			"on h100 tp4 (prefill pool on h200 tp2)"},
	} {
		d := config.Deployment{GPU: "h100", TP: 4, Pools: tc.pools}
		if got := onHardware(&d); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
