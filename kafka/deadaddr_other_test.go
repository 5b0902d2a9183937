//go:build !unix

package kafka

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// deadAddr returns a loopback address nothing listens on (its port freed
// at once; see the unix version for what can go wrong).
func deadAddr(t *testing.T) *net.TCPAddr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().(*net.TCPAddr)
	require.NoError(t, ln.Close())
	return addr
}
