package sweep

import (
	"regexp"
	"strings"
	"testing"
)

// TestK8sNamesFit: the Job's name and its sweep label are valid Kubernetes
// names whatever the sweep is called: a DNS label for metadata.name (52
// characters, room for the pods' suffixes), at most 63 characters for the
// label value, long names cut with a hash so that they stay apart (issue
// 32, item 16: a 70-character sweep name went into the label whole, and
// the API server rejected the Job).
func TestK8sNamesFit(t *testing.T) {
	dnsLabel := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	long := "capacity-search-llama-3.1-70b-h100-tp4-prefix-affinity-vs-weighted-2026"
	longer := long + "-rerun"
	for _, name := range []string{"demo", long, longer, "My Sweep_v2.final", "---"} {
		m := (&K8sJob{Name: name, Image: "img", Exec: "blis-sweep", PVC: "pvc", Mount: "/w", Spec: "/w/s.yaml", Out: "/w/s.sweep", Shards: 2}).Manifest()
		jobName := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(m)
		labels := regexp.MustCompile(`sweep: "([^"]*)"`).FindAllStringSubmatch(m, -1)
		if jobName == nil || len(labels) != 2 {
			t.Fatalf("%q: no name or labels in\n%s", name, m)
		}
		if n := jobName[1]; len(n) > 52 || !dnsLabel.MatchString(n) {
			t.Errorf("%q: metadata.name %q (%d characters) is not a DNS label of at most 52", name, n, len(n))
		}
		for _, l := range labels {
			if v := l[1]; len(v) > 63 || !dnsLabel.MatchString(v) {
				t.Errorf("%q: label value %q (%d characters) is not valid", name, v, len(v))
			}
		}
	}
	if a, b := k8sName(long, 63), k8sName(longer, 63); a == b || !strings.HasPrefix(a, "capacity-search-") {
		t.Errorf("two long names: %q and %q", a, b)
	}
	if got := k8sName("demo", 63); got != "demo" {
		t.Errorf("a short name changed: %q", got)
	}
}
