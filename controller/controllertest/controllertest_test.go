package controllertest

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNetworkCutAndHeal(t *testing.T) {
	n := NewNetwork()
	defer n.Close()
	a, err := n.Reserve()
	require.NoError(t, err)
	b, err := n.Reserve()
	require.NoError(t, err)
	ctx := context.Background()

	ln, err := n.Endpoint(a).Listen(a)
	require.NoError(t, err)
	_, err = n.Endpoint(a).Listen(a)
	require.Error(t, err, "second listener on one address")
	_, err = n.Endpoint(a).Listen(b)
	require.Error(t, err, "listening on another endpoint's address")

	dialed, err := n.Endpoint(b).Dial(ctx, a)
	require.NoError(t, err)
	accepted, err := ln.Accept()
	require.NoError(t, err)
	_, err = dialed.Write([]byte("hi"))
	require.NoError(t, err)
	buf := make([]byte, 2)
	_, err = io.ReadFull(accepted, buf)
	require.NoError(t, err)
	require.Equal(t, "hi", string(buf))

	n.Cut(a, b)
	_, err = accepted.Read(buf)
	require.Error(t, err, "a cut closes open connections")
	_, err = dialed.Read(buf)
	require.Error(t, err)
	_, err = n.Endpoint(b).Dial(ctx, a)
	require.ErrorIs(t, err, ErrLinkCut)
	_, err = n.Endpoint(a).Dial(ctx, b)
	require.ErrorIs(t, err, ErrLinkCut, "both directions")

	n.Heal(a, b)
	c2, err := n.Endpoint(b).Dial(ctx, a)
	require.NoError(t, err)
	acc2, err := ln.Accept()
	require.NoError(t, err)
	c2.Close()
	acc2.Close()

	// A member that closes its listener can listen again (a restart);
	// connections made while nobody listens are refused.
	require.NoError(t, ln.Close())
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = n.Endpoint(b).Dial(ctx, a)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	ln2, err := n.Endpoint(a).Listen(a)
	require.NoError(t, err)
	defer ln2.Close()

	n.Isolate(a)
	_, err = n.Endpoint(b).Dial(ctx, a)
	require.ErrorIs(t, err, ErrLinkCut)
	n.HealAll()
	c4, err := n.Endpoint(b).Dial(ctx, a)
	require.NoError(t, err)
	c4.Close()

	require.NoError(t, n.Close())
	_, err = n.Endpoint(b).Dial(ctx, a)
	require.ErrorIs(t, err, net.ErrClosed)
}

func TestClock(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewClock(start)
	past := c.At(start)
	select {
	case <-past:
	default:
		t.Fatal("a timer at the current time did not fire at once")
	}
	t1 := c.At(start.Add(time.Second))
	t2 := c.At(start.Add(3 * time.Second))
	require.Equal(t, 2, c.Pending())
	c.Advance(999 * time.Millisecond)
	select {
	case <-t1:
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	require.Equal(t, start.Add(time.Second), <-t1)
	require.Equal(t, 1, c.Pending())
	c.Advance(time.Hour)
	require.Equal(t, start.Add(3*time.Second), <-t2, "delivers its due time")
	require.Equal(t, 0, c.Pending())
	require.Equal(t, start.Add(time.Hour+time.Second), c.Now())
}
