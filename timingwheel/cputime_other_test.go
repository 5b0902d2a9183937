//go:build !linux

package timingwheel

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
