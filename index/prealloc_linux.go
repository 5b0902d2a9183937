package index

import (
	"errors"

	"golang.org/x/sys/unix"
)

// preallocate allocates the blocks of [off, off+n) of the file fd, so that
// writes through a mapping cannot fail for want of space (a SIGBUS, not an
// error). File systems that cannot do it are left to allocate on write, as
// they would for any sparse file.
func preallocate(fd int, off, n int64) error {
	for {
		err := unix.Fallocate(fd, 0, off, n)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return nil
		}
		return err
	}
}
