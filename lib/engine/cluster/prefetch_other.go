//go:build !amd64

package cluster

import "unsafe"

func prefetch(p unsafe.Pointer) {}

func prefetchRanges(r []prange) {}
