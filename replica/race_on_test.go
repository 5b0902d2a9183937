//go:build race

package replica_test

// raceEnabled: the race detector slows the members several times over; on
// a loaded machine their heartbeats then miss a 600 ms session now and
// then, which fences them and moves leadership in tests that count on it
// staying put.
const raceEnabled = true
