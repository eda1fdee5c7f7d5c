package fitted

import (
	"os"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	good, _ := sample().Marshal()
	f.Add(good)
	f.Add([]byte("model: m\ngpu: h100\ntp: 1\nterms: [{feature: const, value: 1}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			return
		}
		if c.TP < 1 || len(c.Terms) == 0 {
			t.Fatalf("accepted %+v", c)
		}
		for _, term := range c.Terms {
			if !(term.Value >= 0) {
				t.Fatalf("accepted negative %v", term.Value)
			}
		}
	})
}

func FuzzReadHistoricalCSV(f *testing.F) {
	data, err := os.ReadFile("testdata/blackbox_coefficients_historical.csv")
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.SplitN(string(data), "\n", 4)
	f.Add([]byte(strings.Join(lines[:3], "\n")))
	f.Fuzz(func(t *testing.T, doc []byte) {
		cs, err := ReadHistoricalCSV("f.csv", strings.NewReader(string(doc)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, c := range cs {
			if _, ok := c.Linear(); !ok {
				t.Fatal("loaded row is not linear")
			}
		}
	})
}
