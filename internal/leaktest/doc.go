// Package leaktest checks that tests leave no goroutines behind. Strata's
// Close methods wait for the goroutines they own, so a goroutine still
// running after a test is a leak; one that has returned may still be counted
// for a moment, so the check retries for a bounded while.
package leaktest
