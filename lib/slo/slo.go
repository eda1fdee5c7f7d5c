// Package slo holds latency targets (service-level objectives) and their
// parsing: "ttft=200ms,tpot=50ms" for every request, "interactive:ttft=200ms"
// for one slo_class. The report, the decision recorder's slo_violation
// anomalies, fitness specs, sweeps and the evaluator's summary share them.
package slo

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Metrics with targets, in table order (indices into Targets).
const (
	TTFT = iota
	TPOT
	E2E
	N
)

// Names are the metrics' names, by index.
var Names = [N]string{"ttft", "tpot", "e2e"}

// Targets holds latency targets in µs, by metric; 0 means none.
type Targets struct {
	Target [N]int64
}

func (s Targets) String() string {
	var parts []string
	for m, t := range s.Target {
		if t > 0 {
			parts = append(parts, fmt.Sprintf("%s<=%s", Names[m], time.Duration(t)*time.Microsecond))
		}
	}
	return strings.Join(parts, ",")
}

// Set is the parsed --slo flags: targets for every request and per class.
type Set struct {
	Global  *Targets
	ByClass map[string]*Targets
}

// Empty reports whether no SLO was given.
func (s *Set) Empty() bool { return s == nil || (s.Global == nil && len(s.ByClass) == 0) }

// Classes returns the classes with their own SLO, sorted.
func (s *Set) Classes() []string {
	out := make([]string, 0, len(s.ByClass))
	for c := range s.ByClass {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// For returns the SLO that applies to a request of class (nil: none).
func (s *Set) For(class string) *Targets {
	if s == nil {
		return nil
	}
	if c, ok := s.ByClass[class]; ok && class != "" {
		return c
	}
	return s.Global
}

// Parse parses --slo values: "ttft=200ms,tpot=50ms" (every request) or
// "interactive:ttft=200ms" (requests whose slo_class is interactive).
// Durations use Go syntax (200ms, 1.5s, 800us). Repeating a flag for the
// same scope adds targets to it; setting one metric twice is an error.
func Parse(specs []string) (*Set, error) {
	set := &Set{ByClass: map[string]*Targets{}}
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
			target = &Targets{}
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
			for j, n := range Names {
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
