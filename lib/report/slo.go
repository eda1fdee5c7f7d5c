package report

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// SLO metrics, in table order.
const (
	sloTTFT = iota
	sloTPOT
	sloE2E
	nSLO
)

var sloNames = [nSLO]string{"ttft", "tpot", "e2e"}

// SLO holds latency targets in µs; 0 means no target for that metric.
type SLO struct {
	Target [nSLO]int64
}

func (s SLO) String() string {
	var parts []string
	for m, t := range s.Target {
		if t > 0 {
			parts = append(parts, fmt.Sprintf("%s<=%s", sloNames[m], time.Duration(t)*time.Microsecond))
		}
	}
	return strings.Join(parts, ",")
}

// SLOSet is the parsed --slo flags: a global SLO and per-class ones.
type SLOSet struct {
	Global  *SLO
	ByClass map[string]*SLO
}

// Empty reports whether no SLO was given.
func (s *SLOSet) Empty() bool { return s == nil || (s.Global == nil && len(s.ByClass) == 0) }

// Classes returns the classes with their own SLO, sorted.
func (s *SLOSet) Classes() []string {
	out := make([]string, 0, len(s.ByClass))
	for c := range s.ByClass {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// For returns the SLO that applies to a request of class (nil: none).
func (s *SLOSet) For(class string) *SLO {
	if s == nil {
		return nil
	}
	if c, ok := s.ByClass[class]; ok && class != "" {
		return c
	}
	return s.Global
}

// ParseSLOs parses --slo values: "ttft=200ms,tpot=50ms" (every request) or
// "interactive:ttft=200ms" (requests whose slo_class is interactive).
// Durations use Go syntax (200ms, 1.5s, 800us). Repeating a flag for the
// same scope adds targets to it; setting one metric twice is an error.
func ParseSLOs(specs []string) (*SLOSet, error) {
	set := &SLOSet{ByClass: map[string]*SLO{}}
	for _, spec := range specs {
		class, body := "", spec
		if i := strings.IndexByte(spec, ':'); i >= 0 {
			class, body = strings.TrimSpace(spec[:i]), spec[i+1:]
			if class == "" {
				return nil, fmt.Errorf("--slo %q: expected CLASS:metric=duration, found an empty class", spec)
			}
		}
		target := set.Global
		if class != "" {
			target = set.ByClass[class]
		}
		if target == nil {
			target = &SLO{}
			if class == "" {
				set.Global = target
			} else {
				set.ByClass[class] = target
			}
		}
		for _, kv := range strings.Split(body, ",") {
			kv = strings.TrimSpace(kv)
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("--slo %q: expected metric=duration (ttft, tpot or e2e), found %q", spec, kv)
			}
			m := -1
			for j, n := range sloNames {
				if strings.EqualFold(strings.TrimSpace(k), n) {
					m = j
				}
			}
			if m < 0 {
				return nil, fmt.Errorf("--slo %q: unknown metric %q: expected ttft, tpot or e2e", spec, k)
			}
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("--slo %q: %s: expected a positive duration such as 200ms, found %q", spec, k, v)
			}
			if d%time.Microsecond != 0 {
				return nil, fmt.Errorf("--slo %q: %s: expected whole microseconds, found %s", spec, k, d)
			}
			if target.Target[m] != 0 {
				return nil, fmt.Errorf("--slo %q: %s is already set for this scope", spec, k)
			}
			target.Target[m] = d.Microseconds()
		}
	}
	return set, nil
}
