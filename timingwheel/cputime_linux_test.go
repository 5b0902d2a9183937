package timingwheel

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time consumed by the process, all threads
// together. Unlike wall time it does not grow while the process waits for a
// core taken by other processes.
func processCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
