package cluster

// SetAhead makes clusters of from replicas and more read ahead (ahead.go)
// while their estimated working set is hot bytes or more, until restore
// is called.
func SetAhead(from int, hot int64) (restore func()) {
	oldFrom, oldHot := aheadFrom, aheadHot
	aheadFrom, aheadHot = from, hot
	return func() { aheadFrom, aheadHot = oldFrom, oldHot }
}
