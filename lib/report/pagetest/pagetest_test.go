package pagetest

import (
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checks catch what they are for: each broken page below is reported,
// and the clean one is not.
func TestProblemsFoundInBrowser(t *testing.T) {
	b := Start(t)
	dir := t.TempDir()
	const head = `<!DOCTYPE html><html><head><script>window.addEventListener('DOMContentLoaded',function(){document.body.setAttribute('data-rendered','ok')})</script></head><body data-errors="0">`
	svg := func(text string) string {
		return `<figure id="fig-a" style="width:300px"><svg class="chart" viewBox="0 0 300 100" width="300" height="100">` + text + `</svg></figure>`
	}
	for _, c := range []struct {
		name, body, want string
	}{
		{"clean", svg(`<text x="10" y="50">inside</text>`), ""},
		{"cut label", svg(`<text x="250" y="50">a label running past the edge</text>`), "lies outside its chart"},
		{"wide figure", `<figure id="fig-b" style="width:200px;overflow:auto"><div style="width:400px">x</div></figure>`, "overflows"},
		{"wide page", `<div style="width:2000px">x</div>`, "wider than the"},
		{"console error", `<script>console.error("boom")</script>`, "console.error"},
		{"exception", `<script>null.x()</script>`, "uncaught exception"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".html")
			if err := os.WriteFile(path, []byte(head+c.body+"</body></html>"), 0o644); err != nil {
				t.Fatal(err)
			}
			l, close, err := b.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer close()
			got := strings.Join(l.Problems, "\n")
			if c.want == "" && got != "" {
				t.Errorf("a clean page has problems: %s", got)
			}
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("problems %q: want one mentioning %q", got, c.want)
			}
		})
	}
}

// Diff forgives anti-aliasing noise and catches a moved or missing line.
func TestDiff(t *testing.T) {
	chart := func(lineY int, noise bool) image.Image {
		img := image.NewRGBA(image.Rect(0, 0, 200, 100))
		for y := 0; y < 100; y++ {
			for x := 0; x < 200; x++ {
				c := color.RGBA{255, 255, 255, 255}
				if noise && (x+y)%7 == 0 {
					c = color.RGBA{235, 235, 235, 255} // a light fringe
				}
				if y == lineY || y == lineY+1 {
					c = color.RGBA{0, 114, 178, 255}
				}
				img.Set(x, y, c)
			}
		}
		return img
	}
	if f, _, ok := Diff(chart(50, false), chart(50, true)); !ok || f > MaxDiffFraction {
		t.Errorf("noise: %.3f differs (ok %v), want at most %.3f", f, ok, MaxDiffFraction)
	}
	if f, _, ok := Diff(chart(50, false), chart(60, false)); !ok || f <= MaxDiffFraction {
		t.Errorf("a moved line: %.3f differs, want more than %.3f", f, MaxDiffFraction)
	}
	if _, _, ok := Diff(chart(50, false), image.NewRGBA(image.Rect(0, 0, 200, 140))); ok {
		t.Errorf("a resized figure passed")
	}
}
