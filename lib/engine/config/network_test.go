package config

import (
	"strings"
	"testing"
)

func TestNetworkDelay(t *testing.T) {
	for _, c := range []struct {
		n    Network
		in   int32
		want int64
	}{
		{Network{}, 1000, 0},
		{Network{RTT: 2000e3}, 1000, 2000},                                     // RTT only
		{Network{BandwidthMbps: 8}, 1000, 4000},                                // 4,000 B = 32,000 bit at 8 bit/µs
		{Network{RTT: 500e3, BandwidthMbps: 100, BytesPerToken: 2}, 1000, 660}, // 500 + 16,000/100
		{Network{BandwidthMbps: 3}, 1, 11},                                     // 32/3 = 10.7, rounded up
	} {
		if got := c.n.DelayUS(c.in); got != c.want {
			t.Errorf("%+v: %d tokens: %d µs, want %d", c.n, c.in, got, c.want)
		}
	}
}

func TestNetworkConfig(t *testing.T) {
	c, err := Parse("c.yaml", []byte("replicas: 2\nnetwork: {rtt: 40ms, bandwidth_mbps: 100}\nlatency: {image_encode_us: 1500}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Network.RTT.US() != 40000 || c.Latency.ImageEncodeUS != 1500 {
		t.Fatalf("%+v %v", c.Network, err)
	}
	if y := c.YAML(); !strings.Contains(y, "network:") || !strings.Contains(y, "image_encode_us: 1500") {
		t.Fatalf("printed config lacks the network or image cost:\n%s", y)
	}
	// Off: the printed config is as before.
	d, _ := Parse("d.yaml", []byte("replicas: 2\n"))
	if y := d.YAML(); strings.Contains(y, "network") || strings.Contains(y, "image_encode") {
		t.Fatalf("%s", y)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"network: {rtt: -1s}\n", "b.yaml:1: network.rtt: expected a non-negative duration, found \"-1s\""},
		{"network: {bytes_per_token: -2}\n", "b.yaml:1: network.bytes_per_token: expected bytes per token in [0, 1e6] (0 = 4), found -2"},
		{"latency: {image_encode_us: -5}\n", "b.yaml:1: latency.image_encode_us: expected µs per image >= 0 and finite, found -5"},
		{"latency: {mode: fitted, beta: [1, 2, 3]}\n", "b.yaml:1: latency.beta: β makes a linear model, but latency.mode is fitted: set latency.mode to linear (or auto), or remove latency.beta"},
		{"latency: {beta: [1, 2, 3], coefficients: c.yaml}\n", "b.yaml:1: latency.beta: latency.beta and latency.coefficients are two step-time models: give one"},
	} {
		c, err := Parse("b.yaml", []byte(bad.yaml))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || err.Error() != bad.want {
			t.Errorf("%q: %v, want %s", bad.yaml, err, bad.want)
		}
	}
}

// FuzzParseNetwork: network and image-cost keys never panic the parser,
// and an accepted config validates.
func FuzzParseNetwork(f *testing.F) {
	for _, s := range []string{"network: {rtt: 40ms, bandwidth_mbps: 100, bytes_per_token: 4}\n", "network: {rtt: 1e9}\n",
		"latency: {image_encode_us: 1500}\n", "network: {bandwidth_mbps: .nan}\n", "network: [1]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("fuzz.yaml", b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails validation: %v", err)
		}
		_ = c.Network.DelayUS(1 << 30)
	})
}

// examples/clusters/defended.yaml (docs/workload.md's defended cluster) loads.
func TestDefendedClusterExample(t *testing.T) {
	c, err := Load("../../../examples/clusters/defended.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Router.Admission != "queue-limit" || c.Engine.SchedulingPolicy != "priority" || c.Replicas != 4 {
		t.Fatalf("%+v %v", c, err)
	}
}
