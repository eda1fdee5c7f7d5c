package sweep

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/slo"
)

// checkReport validates the report options with blis-report's own parsers.
func checkReport(o *ReportOptions) error {
	if _, err := slo.Parse(o.SLO); err != nil {
		return err
	}
	if o.By != "" && !slices.Contains(report.GroupNames, o.By) {
		return fmt.Errorf("by: expected one of %v, found %q", report.GroupNames, o.By)
	}
	return nil
}
