//go:build !(linux || darwin || freebsd || dragonfly)

package log

// volumeBytes is unknown on this platform.
func volumeBytes(string) (total, usable int64) { return -1, -1 }
