package slo

import (
	"strings"
	"testing"
)

func TestParseSLOs(t *testing.T) {
	for _, c := range []struct {
		specs []string
		want  string // "" for ok
	}{
		{[]string{"ttft=200ms,tpot=50ms"}, ""},
		{[]string{"interactive:ttft=200ms", "batch:e2e=30s", "e2e=1m"}, ""},
		{[]string{"ttft=200ms", "ttft=100ms"}, "already set"},
		{[]string{"ttfb=1s"}, "unknown metric"},
		{[]string{"ttft=fast"}, "positive duration"},
		{[]string{"ttft=-1s"}, "positive duration"},
		{[]string{":ttft=1s"}, "empty class"},
		{[]string{"ttft"}, "metric=duration"},
		{[]string{"ttft=1ns"}, "whole microseconds"},
	} {
		s, err := Parse(c.specs)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.specs, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v (%v), want error containing %q", c.specs, err, s, c.want)
		}
	}
	s, err := Parse([]string{"interactive:ttft=200ms", "e2e=2s"})
	if err != nil {
		t.Fatal(err)
	}
	if s.For("interactive").Target[TTFT] != 200000 || s.For("batch").Target[E2E] != 2000000 || s.For("").Target[TTFT] != 0 {
		t.Error("class lookup")
	}
}

func FuzzParseSLOs(f *testing.F) {
	for _, s := range []string{"ttft=200ms,tpot=50ms", "interactive:ttft=200ms", "batch:e2e=30s", ":", "=", "ttft=1h2m3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse([]string{s})
		if err != nil {
			return
		}
		for _, tg := range append([]*Targets{set.Global}, func() (o []*Targets) {
			for _, c := range set.Classes() {
				o = append(o, set.ByClass[c])
			}
			return
		}()...) {
			if tg == nil {
				continue
			}
			for _, v := range tg.Target {
				if v < 0 {
					t.Fatalf("%q: negative target", s)
				}
			}
		}
	})
}
