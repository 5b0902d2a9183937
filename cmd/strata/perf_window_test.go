package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// An interval keeps a bounded sample of its latencies, spread over the
// whole interval, while its average and maximum count every one.
func TestLatencyWindowBounded(t *testing.T) {
	l := newLatencies(0)
	const n = 5 * maxWindowSamples
	for i := range n {
		l.add(1, 10, time.Duration(i+1)*time.Microsecond)
	}
	if len(l.window) > maxWindowSamples {
		t.Fatalf("window holds %d latencies, more than %d", len(l.window), maxWindowSamples)
	}
	if first, last := l.window[0], l.window[len(l.window)-1]; first > 10*time.Microsecond || last < time.Duration(n-l.winEach)*time.Microsecond {
		t.Errorf("the sample spans %v..%v, not the whole interval 1µs..%v", first, last, time.Duration(n)*time.Microsecond)
	}
	var out strings.Builder
	l.line(&out, "sent")
	// avg of 1..n µs is (n+1)/2 µs; max n µs; 50th about n/2 µs.
	wantAvg := float64(n+1) / 2 / 1000
	if !strings.Contains(out.String(), "records sent") || !strings.Contains(out.String(), "ms max latency") {
		t.Fatalf("line %q", out.String())
	}
	var avg, mx, p50 float64
	if _, err := fmtSscan(out.String(), &avg, &mx, &p50); err != nil {
		t.Fatalf("line %q: %v", out.String(), err)
	}
	if avg < wantAvg-0.01 || avg > wantAvg+0.01 || mx != float64(n)/1000 || p50 < 0.45*float64(n)/1000 || p50 > 0.55*float64(n)/1000 {
		t.Errorf("avg %g (want %g), max %g (want %g), 50th %g: %s", avg, wantAvg, mx, float64(n)/1000, p50, out.String())
	}
	if len(l.window) != 0 || l.winEach != 1 {
		t.Errorf("the next interval does not start afresh: %d kept, every %d", len(l.window), l.winEach)
	}
}

// fmtSscan reads the avg, max and 50th figures of an interval line.
func fmtSscan(line string, avg, mx, p50 *float64) (int, error) {
	_, rest, _ := strings.Cut(line, "MB/sec), ")
	return fmt.Sscanf(rest, "%g ms avg latency, %g ms max latency, %g ms 50th", avg, mx, p50)
}
