package cluster

// SetAheadFrom makes clusters of n replicas and more read ahead (ahead.go)
// until restore is called.
func SetAheadFrom(n int) (restore func()) {
	old := aheadFrom
	aheadFrom = n
	return func() { aheadFrom = old }
}
