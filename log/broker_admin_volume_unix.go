//go:build linux || darwin || freebsd || dragonfly

package log

import "golang.org/x/sys/unix"

// volumeBytes is the size of the volume dir is on and the bytes of it an
// unprivileged writer may still use (Kafka's total and usable bytes); -1
// each when unknown.
func volumeBytes(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs
}
