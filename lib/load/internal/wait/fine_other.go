//go:build !linux

package wait

import "time"

// fine sleeps d on a Go timer (timerfd is Linux's).
func fine(d time.Duration) { time.Sleep(d) }
