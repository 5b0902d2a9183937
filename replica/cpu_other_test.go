//go:build !unix

package replica_test

import "time"

// processCPU is not measured here: the benchmarks report 0.
func processCPU() time.Duration { return 0 }

// processCPUSplit is not measured here either.
func processCPUSplit() (user, sys time.Duration) { return 0, 0 }
