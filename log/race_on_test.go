//go:build race

package log

// raceEnabled: the race detector makes sync.Pool drop items at random, so the
// pools' allocation-free steady state cannot be measured under it.
const raceEnabled = true
