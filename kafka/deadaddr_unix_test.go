//go:build unix

package kafka

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// deadAddr returns a loopback address that refuses connections and that
// no other process can take while the test runs: a socket bound to it that
// never listens. (A listener closed at once frees its port, which another
// test process on a busy machine may bind — then the "dead" broker
// answers, as another test's server.)
func deadAddr(t *testing.T) *net.TCPAddr {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}
}
