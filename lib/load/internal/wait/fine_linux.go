package wait

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fine sleeps d on a timerfd read through the runtime poller; if no timerfd
// can be had, on a Go timer.
func fine(d time.Duration) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		time.Sleep(d)
		return
	}
	f := os.NewFile(uintptr(fd), "timerfd") // non-blocking: served by the poller
	defer f.Close()
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		time.Sleep(d)
		return
	}
	var b [8]byte
	f.Read(b[:])
}
