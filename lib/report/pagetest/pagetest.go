// Package pagetest checks the HTML pages of lib/report in headless
// Chromium, for the tests of the packages that write them: the page loads
// with no console error or uncaught exception, every chart drew data,
// nothing overflows its frame (the page, a figure, a label of an SVG), and
// each figure looks like its committed reference screenshot.
//
// Screenshots are compared forgivingly, so that font anti-aliasing and a
// busy machine do not fail a test but a broken chart does: both images are
// averaged over 2×2 blocks, a block differs when a channel differs by more
// than ChannelTolerance (of 255), and the figure fails when more than
// MaxDiffFraction of its blocks differ or its size changed by more than a
// pixel. The window is pinned at Width × 900 CSS pixels with a device scale
// factor of 1, and the pages name their fonts (DejaVu Sans, which Debian
// installs with fontconfig; Liberation Sans, with chromium).
package pagetest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const (
	// Width is the window width the pages are checked at: a common laptop.
	Width = 1280
	// ChannelTolerance is how far (of 255) a channel of a 2×2-averaged
	// block may move before the block counts as different.
	ChannelTolerance = 40
	// MaxDiffFraction is the share of blocks of a figure that may differ.
	MaxDiffFraction = 0.01
)

// Browser is one headless Chromium shared by the pages of a test.
type Browser struct {
	ctx    context.Context
	cancel func()
}

// Start starts Chromium, or skips the test when it is not installed (CI
// installs it: .ci/run).
func Start(t *testing.T) *Browser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install -y chromium): HTML not checked in a browser")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(Width, 900),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.Flag("disable-lcd-text", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: ctx, cancel: func() { cancel(); acancel() }}
	t.Cleanup(b.cancel)
	return b
}

// Page is a loaded page.
type Page struct {
	Figures []string // ids of the figures, in page order
	Charts  int      // charts that drew data (data-charts)
}

// Loaded is a page loaded in the browser.
type Loaded struct {
	Page
	// Problems are what the page must not have: console errors and
	// warnings, uncaught exceptions, script errors, a page wider than the
	// window, content outside its figure or chart.
	Problems []string
	ctx      context.Context
}

// Load opens the HTML file at path in a new tab and reads its state; close
// releases the tab.
func (b *Browser) Load(path string) (l *Loaded, close func(), err error) {
	ctx, cancel := chromedp.NewContext(b.ctx)
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute) // a loaded 2-core machine
	close = func() { tcancel(); cancel() }
	var mu sync.Mutex
	var console []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				console = append(console, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			console = append(console, fmt.Sprintf("uncaught exception: %s (line %d)", msg, d.LineNumber+1))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				console = append(console, fmt.Sprintf("browser log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		}
	}); err != nil {
		close()
		return nil, nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		close()
		return nil, nil, err
	}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(Width, 900, chromedp.EmulateScale(1)),
		chromedp.Navigate("file://"+abs),
		chromedp.WaitReady(chromedp.CSS(`body[data-rendered]`)),
	); err != nil {
		close()
		return nil, nil, fmt.Errorf("%s: loading in chromium: %w", path, err)
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](stateJS))
	if err != nil {
		close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	l = &Loaded{Page: Page{Figures: state.Figures, Charts: state.Charts}, ctx: ctx}
	mu.Lock()
	l.Problems = append(l.Problems, console...)
	mu.Unlock()
	if state.Errors != "0" {
		l.Problems = append(l.Problems, fmt.Sprintf("%s script errors (data-errors)", state.Errors))
	}
	if state.ScrollWidth > Width {
		l.Problems = append(l.Problems, fmt.Sprintf("the page is %d px wide: wider than the %d px window", state.ScrollWidth, Width))
	}
	l.Problems = append(l.Problems, state.Overflows...)
	return l, close, nil
}

// RenderTime loads the page in a new tab and returns the time from the
// navigation to the second animation frame after the page's scripts ran:
// parsed, laid out and painted.
func (b *Browser) RenderTime(path string) (time.Duration, error) {
	ctx, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer tcancel()
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(Width, 900, chromedp.EmulateScale(1)), chromedp.Navigate("about:blank")); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+abs), chromedp.WaitReady(chromedp.CSS(`body[data-rendered]`))); err != nil {
		return 0, err
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Screenshot is a PNG of the element with the given id.
func (l *Loaded) Screenshot(id string) ([]byte, error) {
	return chromedp.Run(l.ctx, chromedp.Screenshot(chromedp.CSS("#"+id)))
}

// Check loads the HTML file at path and fails the test on any of its
// Problems; when goldenDir is not "", it compares every figure with
// goldenDir/<figure id>.png (update rewrites those references).
func (b *Browser) Check(t *testing.T, path, goldenDir string, update bool) *Page {
	t.Helper()
	l, close, err := b.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer close()
	for _, p := range l.Problems {
		t.Errorf("%s: %s", path, p)
	}
	if goldenDir == "" {
		return &l.Page
	}
	for _, id := range l.Figures {
		shot, err := l.Screenshot(id)
		if err != nil {
			t.Errorf("%s: screenshot of %s: %v", path, id, err)
			continue
		}
		compare(t, filepath.Join(goldenDir, id+".png"), shot, update)
	}
	// A reference without a figure is a picture the page stopped drawing:
	// an error, or with update a file to drop.
	refs, _ := filepath.Glob(filepath.Join(goldenDir, "*.png"))
	for _, r := range refs {
		if id := strings.TrimSuffix(filepath.Base(r), ".png"); !slices.Contains(l.Figures, id) {
			if update {
				os.Remove(r)
			} else {
				t.Errorf("%s: the page has no figure %s, but %s exists (rerun with -update if it was removed on purpose)", path, id, r)
			}
		}
	}
	return &l.Page
}

type pageState struct {
	Errors      string   `json:"errors"`
	Charts      int      `json:"charts"`
	ScrollWidth int      `json:"scrollWidth"`
	Figures     []string `json:"figures"`
	Overflows   []string `json:"overflows"`
}

// stateJS reads the page's own checks and looks for anything drawn outside
// its frame: a figure's content wider than the figure, and an SVG text or
// mark outside its SVG's box (a cut label).
const stateJS = `(() => {
  const out = [];
  document.querySelectorAll('figure').forEach(f => {
    if (f.scrollWidth > f.clientWidth + 1) out.push('figure ' + f.id + ' overflows: ' + f.scrollWidth + ' > ' + f.clientWidth + ' px');
    f.querySelectorAll('svg.chart').forEach(s => {
      const vb = s.viewBox.baseVal;
      s.querySelectorAll('text').forEach(t => {
        const b = t.getBBox();
        const m = t.transform.baseVal.consolidate();
        let x0 = b.x, y0 = b.y, x1 = b.x + b.width, y1 = b.y + b.height;
        if (m) {
          const pts = [[x0, y0], [x1, y0], [x0, y1], [x1, y1]].map(([x, y]) => {
            const p = new DOMPoint(x, y).matrixTransform(m.matrix); return [p.x, p.y]; });
          x0 = Math.min(...pts.map(p => p[0])); x1 = Math.max(...pts.map(p => p[0]));
          y0 = Math.min(...pts.map(p => p[1])); y1 = Math.max(...pts.map(p => p[1]));
        }
        if (x0 < vb.x - 1 || y0 < vb.y - 1 || x1 > vb.x + vb.width + 1 || y1 > vb.y + vb.height + 1)
          out.push('figure ' + f.id + ': text "' + t.textContent + '" lies outside its chart (' + [x0, y0, x1, y1].map(Math.round) + ' vs ' + vb.width + 'x' + vb.height + ')');
      });
    });
  });
  return {errors: document.body.getAttribute('data-errors'), charts: +document.body.getAttribute('data-charts'),
    scrollWidth: document.documentElement.scrollWidth, figures: [...document.querySelectorAll('figure')].map(f => f.id), overflows: out};
})()`

func compare(t *testing.T, ref string, shot []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ref, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Errorf("%v (run the test with -update to create the reference)", err)
		return
	}
	a, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b, err := png.Decode(bytes.NewReader(want))
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	frac, diff, ok := Diff(a, b)
	if ok && frac <= MaxDiffFraction {
		return
	}
	// Leave the screenshot and a map of the differences for a person to look at.
	dir := filepath.Join(os.TempDir(), "blis-pagetest")
	os.MkdirAll(dir, 0o755)
	base := strings.ReplaceAll(strings.TrimSuffix(ref, ".png"), string(filepath.Separator), "_")
	got := filepath.Join(dir, base+".got.png")
	os.WriteFile(got, shot, 0o644)
	if diff != nil {
		var buf bytes.Buffer
		png.Encode(&buf, diff)
		os.WriteFile(filepath.Join(dir, base+".diff.png"), buf.Bytes(), 0o644)
	}
	if !ok {
		t.Errorf("%s: the figure is %v, the reference %v (screenshot in %s; rerun with -update if intended)", ref, a.Bounds().Size(), b.Bounds().Size(), got)
		return
	}
	t.Errorf("%s: %.2f%% of the figure differs from the reference (at most %.2f%% may; screenshot and differences in %s; rerun with -update if intended)",
		ref, frac*100, MaxDiffFraction*100, dir)
}

// Diff compares two screenshots as the tests do: it returns the fraction of
// 2×2 blocks whose average differs by more than ChannelTolerance in some
// channel, an image marking them, and false when the sizes differ by more
// than a pixel either way.
func Diff(a, b image.Image) (float64, image.Image, bool) {
	sa, sb := a.Bounds().Size(), b.Bounds().Size()
	if abs(sa.X-sb.X) > 1 || abs(sa.Y-sb.Y) > 1 {
		return 1, nil, false
	}
	w, h := min(sa.X, sb.X)/2, min(sa.Y, sb.Y)/2
	out := image.NewGray(image.Rect(0, 0, w, h))
	n := 0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			ca, cb := block(a, x, y), block(b, x, y)
			d := false
			for k := 0; k < 3; k++ {
				if abs(ca[k]-cb[k]) > ChannelTolerance {
					d = true
				}
			}
			if d {
				n++
				out.SetGray(x, y, color.Gray{Y: 0})
			} else {
				out.SetGray(x, y, color.Gray{Y: 230})
			}
		}
	}
	if w*h == 0 {
		return 0, out, true
	}
	return float64(n) / float64(w*h), out, true
}

// block is the mean RGB (0-255) of the 2×2 block at (x, y) of the half-size grid.
func block(img image.Image, x, y int) [3]int {
	o := img.Bounds().Min
	var s [3]int
	for dy := 0; dy < 2; dy++ {
		for dx := 0; dx < 2; dx++ {
			r, g, b, _ := img.At(o.X+2*x+dx, o.Y+2*y+dy).RGBA()
			s[0] += int(r >> 8)
			s[1] += int(g >> 8)
			s[2] += int(b >> 8)
		}
	}
	return [3]int{s[0] / 4, s[1] / 4, s[2] / 4}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
