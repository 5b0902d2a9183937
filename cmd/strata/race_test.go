//go:build race

package main

// raceEnabled: the tests run under -race, and so does the binary they build.
const raceEnabled = true
