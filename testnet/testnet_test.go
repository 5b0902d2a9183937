package testnet_test

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/testnet"
)

// server is a node listening on one reserved address.
func server(t *testing.T, n *testnet.Network, name string) (string, net.Listener) {
	t.Helper()
	addr, err := n.Node(name).Reserve()
	require.NoError(t, err)
	ln, err := n.Node(name).Listen(addr)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return addr, ln
}

// connect dials addr from node from and returns both ends, after checking
// that bytes pass both ways.
func connect(t *testing.T, n *testnet.Network, from, addr string, ln net.Listener) (dialed, accepted net.Conn) {
	t.Helper()
	dialed, err := n.Node(from).Dial(context.Background(), addr)
	require.NoError(t, err)
	t.Cleanup(func() { dialed.Close() })
	accepted, err = ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { accepted.Close() })
	requireTalk(t, dialed, accepted)
	requireTalk(t, accepted, dialed)
	return dialed, accepted
}

func requireTalk(t *testing.T, w, r net.Conn) {
	t.Helper()
	_, err := w.Write([]byte("hi"))
	require.NoError(t, err)
	buf := make([]byte, 2)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	require.Equal(t, "hi", string(buf))
}

// requireClosed checks that both ends of a connection see it closed.
func requireClosed(t *testing.T, ends ...net.Conn) {
	t.Helper()
	for _, c := range ends {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second)) // fails if closed

		_, err := c.Read(make([]byte, 1))
		require.Error(t, err)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "still open")
	}
}

func requireCut(t *testing.T, n *testnet.Network, from, addr string) {
	t.Helper()
	_, err := n.Node(from).Dial(context.Background(), addr)
	require.ErrorIs(t, err, testnet.ErrLinkCut)
}

func TestCutAndHeal(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	defer n.Close()
	addrA, lnA := server(t, n, "a")
	addrB, _ := server(t, n, "b")
	dialed, accepted := connect(t, n, "b", addrA, lnA)
	_, err := n.Node("c").DialContext(context.Background(), "tcp", addrA)
	require.NoError(t, err, "a client that does not listen is a node too")
	_, err = lnA.Accept()
	require.NoError(t, err)

	require.True(t, n.Linked("a", "b"))
	n.Cut("a", "b")
	require.False(t, n.Linked("b", "a"))
	requireClosed(t, dialed, accepted)
	requireCut(t, n, "b", addrA)
	requireCut(t, n, "a", addrB)
	require.True(t, n.Linked("a", "c"), "other links stay up")
	n.Cut("a", "a")
	require.True(t, n.Linked("a", "a"), "a node always reaches itself")

	n.Heal("b", "a")
	connect(t, n, "b", addrA, lnA)
}

func TestIsolateAndRejoin(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	defer n.Close()
	addrA, lnA := server(t, n, "a")
	addrB, lnB := server(t, n, "b")
	d1, a1 := connect(t, n, "b", addrA, lnA)
	d2, a2 := connect(t, n, "a", addrB, lnB)
	n.Cut("a", "c")

	n.Isolate("a")
	requireClosed(t, d1, a1, d2, a2)
	requireCut(t, n, "b", addrA)
	requireCut(t, n, "a", addrB)
	requireCut(t, n, "newcomer", addrA) // a node first seen after the isolation
	connect(t, n, "a", addrA, lnA)      // but not from itself
	n.Heal("a", "b")
	requireCut(t, n, "b", addrA) // isolated still

	n.Rejoin("a")
	connect(t, n, "b", addrA, lnA)
	connect(t, n, "newcomer", addrA, lnA)
	require.False(t, n.Linked("a", "c"), "a link cut on its own stays cut")
	n.HealAll()
	require.True(t, n.Linked("a", "c"))
}

func TestPartition(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	defer n.Close()
	addrs := map[string]string{}
	lns := map[string]net.Listener{}
	for _, name := range []string{"1", "2", "3"} {
		addrs[name], lns[name] = server(t, n, name)
	}
	within, withinAcc := connect(t, n, "1", addrs["2"], lns["2"])
	across, acrossAcc := connect(t, n, "2", addrs["3"], lns["3"])
	outside, outsideAcc := connect(t, n, "client", addrs["3"], lns["3"])

	n.Partition([]string{"1", "2"}, []string{"3"})
	requireClosed(t, across, acrossAcc)
	requireTalk(t, within, withinAcc)
	requireTalk(t, outside, outsideAcc) // on no side: untouched
	requireCut(t, n, "1", addrs["3"])
	requireCut(t, n, "3", addrs["2"])
	connect(t, n, "2", addrs["1"], lns["1"])
	connect(t, n, "client", addrs["1"], lns["1"])

	n.HealAll()
	connect(t, n, "3", addrs["1"], lns["1"])
}

// TestRestart: a node that closes its listener can listen again on its
// reserved address; while nobody listens, dials are refused.
func TestRestart(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	defer n.Close()
	a := n.Node("a")
	addr, err := a.Reserve()
	require.NoError(t, err)
	other, err := n.Node("b").Reserve()
	require.NoError(t, err)
	_, err = a.Listen(other)
	require.Error(t, err, "listening on another node's address")
	_, err = a.Listen("127.0.0.1:1")
	require.Error(t, err, "listening on an address never reserved")

	ln, err := a.Listen(addr)
	require.NoError(t, err)
	require.Equal(t, addr, ln.Addr().String())
	_, err = a.Listen(addr)
	require.Error(t, err, "a second listener on one address")
	d, acc := connect(t, n, "b", addr, ln)

	require.NoError(t, ln.Close())
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	requireTalk(t, d, acc) // closing a listener leaves its connections open
	_, err = n.Node("b").Dial(context.Background(), addr)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	_, err = n.Node("b").Dial(context.Background(), "127.0.0.1:1")
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "an address the network does not know")

	ln2, err := a.Listen(addr)
	require.NoError(t, err)
	defer ln2.Close()
	connect(t, n, "b", addr, ln2)
}

// TestConnsAreTCP: both ends are the operating system's TCP connections,
// so sendfile, splice and deadlines work as in production.
func TestConnsAreTCP(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	defer n.Close()
	addr, ln := server(t, n, "a")
	d, acc := connect(t, n, "b", addr, ln)
	require.IsType(t, &net.TCPConn{}, d)
	require.IsType(t, &net.TCPConn{}, acc)
	_, err := n.Node("b").DialContext(context.Background(), "udp", addr)
	require.Error(t, err)
}

func TestClose(t *testing.T) {
	leaktest.Check(t)
	n := testnet.New()
	addr, ln := server(t, n, "a")
	d, acc := connect(t, n, "b", addr, ln)
	accepting := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepting <- err
	}()

	require.NoError(t, n.Close())
	require.ErrorIs(t, <-accepting, net.ErrClosed)
	requireClosed(t, d, acc)
	_, err := n.Node("b").Dial(context.Background(), addr)
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = n.Node("a").Listen(addr)
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = n.Node("a").Reserve()
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, n.Close(), "twice")
}
