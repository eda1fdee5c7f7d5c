package synth

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every YAML block in docs/workload.md is a complete, valid spec that runs.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "workload.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 12 {
		t.Fatalf("only %d yaml blocks in docs/workload.md", len(blocks))
	}
	for i, b := range blocks {
		s, err := Parse(b[1], "docs/workload.md block "+string(rune('A'+i)), filepath.Join("..", "..", "docs"))
		if err != nil {
			t.Fatal(err)
		}
		if s.NumRequests == 0 || s.NumRequests > 3000 {
			s.NumRequests = 3000
		}
		rows, _ := collect(t, s)
		if len(rows) == 0 {
			t.Fatalf("block %d made no rows", i)
		}
		checkInvariants(t, s, rows)
	}
}
