package log

import (
	"runtime"
	"testing"
	"time"
)

// noLeaks fails the test if goroutines started during it outlive it. Call it
// first: its check runs after every other cleanup. A goroutine that has
// returned can still be counted for a moment, so the check retries, bounded.
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		for range 200 {
			if runtime.NumGoroutine() <= before {
				return
			}
			runtime.Gosched()
			time.Sleep(5 * time.Millisecond)
		}
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	})
}
