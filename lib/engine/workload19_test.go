package engine

import (
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Linear model β = (1000, 1, 10): a prefill of n tokens alone takes 1000+n µs.

// The client → gateway transfer delays arrival at the router by
// RTT + tokens × bytes_per_token × 8 / Mbit/s µs; the client's clock
// (arrival_us, TTFT) starts at the send.
func TestNetworkTransfer(t *testing.T) {
	c := testConfig()
	c.Network = config.Network{RTT: config.Duration(2 * time.Millisecond), BandwidthMbps: 8}
	child := row.NewRequest("b")
	child.InputTokens, child.OutputTokens, child.DependsOn, child.DelayUS = 10, 1, []string{"a"}, 300
	sink, _ := run(t, c, []row.Request{req("a", 0, 100, 2), child}, Options{})
	got := sink.byID()
	// a: 100 tokens × 4 B × 8 / 8 Mbit/s = 400 µs + 2000 µs RTT.
	a := got["a"]
	if a.ArrivalUS != 0 || a.RoutedUS != 2400 || a.FirstTokenUS != 2400+1100 || a.TTFTUS != 3500 {
		t.Fatalf("a: %+v", a)
	}
	// b is sent 300 µs after a finishes and reaches the router 2040 µs later.
	b := got["b"]
	if b.ArrivalUS != a.FinishedUS+300 || b.RoutedUS != b.ArrivalUS+2040 {
		t.Fatalf("b: arrival %d routed %d (a finished %d)", b.ArrivalUS, b.RoutedUS, a.FinishedUS)
	}
	// Off by default: routed at arrival.
	sink, _ = run(t, testConfig(), []row.Request{req("a", 0, 100, 2)}, Options{})
	if a := sink.rs[0]; a.RoutedUS != 0 || a.FirstTokenUS != 1100 {
		t.Fatalf("off: %+v", a)
	}
}

func TestNetworkValidation(t *testing.T) {
	c := testConfig()
	c.Network.BandwidthMbps = -1
	if err := c.Validate(); err == nil || err.Error() != "network.bandwidth_mbps: expected Mbit/s >= 0 (0 = no transfer term), found -1" {
		t.Fatalf("%v", err)
	}
}

// Images cost latency.image_encode_us each in the step that schedules the
// request's first prefill chunk; without the setting they cost nothing.
func TestImageEncodeCost(t *testing.T) {
	r := req("a", 0, 100, 3)
	r.NumImages = 3
	c := testConfig()
	c.Latency.ImageEncodeUS = 500
	sink, _ := run(t, c, []row.Request{r}, Options{})
	// Prefill 1000 + 100 + 3×500 = 2600; two decodes of 1010.
	if a := sink.rs[0]; a.FirstTokenUS != 2600 || a.FinishedUS != 2600+2*1010 {
		t.Fatalf("%+v", a)
	}
	sink, _ = run(t, testConfig(), []row.Request{r}, Options{})
	if a := sink.rs[0]; a.FirstTokenUS != 1100 {
		t.Fatalf("off: %+v", a)
	}
}
