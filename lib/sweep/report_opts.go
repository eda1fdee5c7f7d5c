package sweep

import (
	"fmt"
	"slices"

	"github.com/blis-sim/blis/lib/report"
)

// checkReport validates the report options with blis-report's own parsers.
func checkReport(o *ReportOptions) error {
	if _, err := report.ParseSLOs(o.SLO); err != nil {
		return err
	}
	if o.By != "" && !slices.Contains(report.GroupNames, o.By) {
		return fmt.Errorf("by: expected one of %v, found %q", report.GroupNames, o.By)
	}
	return nil
}
