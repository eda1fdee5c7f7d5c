package sweep

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/report"
)

// The sweep page draws in a real browser: every chart has data, no script
// error, no fetch (the page is self-contained).
func TestSweepHTMLInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install -y chromium): sweep HTML not checked in a browser")
	}
	p := plan(t, load(t, "chat.yaml"))
	out := t.TempDir()
	execute(t, p, Options{Out: out, Workers: 2})
	summarise(t, p, out)
	for _, tc := range []struct {
		table string
		opt   report.SweepOptions
		want  string // charts with data
	}{
		// x = the rate, one line per replica count; 8 default metrics (with SLO) and the attainment map.
		{"points.parquet", report.SweepOptions{}, "9"},
		// From the runs table: means and CIs computed over the seeds.
		{"summary.parquet", report.SweepOptions{Metrics: []string{"ttft_p99_ms", "req_per_s"}, X: "replicas"}, "3"},
	} {
		st, err := report.ReadSweep(filepath.Join(out, tc.table))
		if err != nil {
			t.Fatal(err)
		}
		page := filepath.Join(out, strings.TrimSuffix(tc.table, ".parquet")+".html")
		if err := st.WriteHTMLFile(page, tc.opt); err != nil {
			t.Fatal(err)
		}
		html, _ := os.ReadFile(page)
		if bytes.Contains(bytes.ReplaceAll(html, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil), []byte("http")) {
			t.Errorf("%s: the page references the network", tc.table)
		}
		cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+filepath.Join(out, "profile"),
			"--virtual-time-budget=5000", "--dump-dom", "file://"+page)
		var dom, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &dom, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
		d := dom.String()
		i := strings.Index(d, "<body")
		if i < 0 {
			t.Fatalf("%s: no body in the DOM", tc.table)
		}
		body := d[i:]
		body = body[:strings.Index(body, ">")]
		for _, want := range []string{`data-rendered="ok"`, `data-errors="0"`, `data-charts="` + tc.want + `"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: body %s: want %s", tc.table, body, want)
			}
		}
	}
}
