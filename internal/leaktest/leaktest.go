package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// Check fails t if goroutines started during the test outlive it. Call it
// first in the test: its check runs after every other cleanup.
func Check(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { Wait(t, before) })
}

// Wait fails t, with every goroutine's stack, unless no more than before
// goroutines run within 5 seconds.
func Wait(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines leaked: %d before, %d after\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // nothing to await: a goroutine's exit is not observable
	}
}
