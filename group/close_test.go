package group_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
)

func TestCloseFailsPendingJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		ctx := context.Background()
		a, err := c.Join(ctx, req("a", "a"))
		require.NoError(t, err)
		chB := joinAsync(ctx, c, req("b", "a"))
		chC := joinAsync(ctx, c, req("c", "a"))
		pending(t, chB)
		pending(t, chC)
		require.NoError(t, c.Close())
		require.ErrorIs(t, ready(t, chB).err, group.ErrClosed)
		require.ErrorIs(t, ready(t, chC).err, group.ErrClosed)
		require.NoError(t, c.Close(), "Close twice")

		_, err = c.Join(ctx, req("d", "a"))
		require.ErrorIs(t, err, group.ErrClosed)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrClosed)
		require.ErrorIs(t, c.Leave(ctx, "g", a.MemberID), group.ErrClosed)
		require.ErrorIs(t, c.Commit(ctx, "g", a.MemberID, a.Generation, nil), group.ErrClosed)
		// No timer fires after Close: a minute later nothing has changed.
		time.Sleep(time.Minute)
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 3)
		// The bubble ends only when every goroutine it started has: a timer
		// callback or Join left behind would fail the test.
	})
}

// blockingStore blocks every Store until release is closed.
type blockingStore struct {
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Store(string, map[group.TopicPartition]int64) error {
	s.entered <- struct{}{}
	<-s.release
	return nil
}

// TestCloseWaitsForStore: Close returns only after the Store calls in
// progress have; a commit queued behind one fails with ErrClosed.
func TestCloseWaitsForStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{entered: make(chan struct{}, 2), release: make(chan struct{})}
		c, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		offs := map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 1}
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { first <- c.Commit(context.Background(), "g", "", -1, offs) }()
		<-store.entered
		go func() { second <- c.Commit(context.Background(), "g", "", -1, offs) }()
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while Store was in progress")
		default:
		}
		close(store.release)
		<-closed
		require.NoError(t, <-first)
		require.ErrorIs(t, <-second, group.ErrClosed)
		require.Equal(t, offs, c.Committed("g", nil))
	})
}

// manualClock hands its timers to the test, which fires them when it likes.
type manualClock struct {
	mu     sync.Mutex
	timers []*manualTimer
}

type manualTimer struct {
	f       func()
	stopped bool
	fired   bool
}

func (c *manualClock) Now() time.Time { return time.Unix(0, 0) }

func (c *manualClock) AfterFunc(d time.Duration, f func()) group.Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{f: f}
	c.timers = append(c.timers, t)
	return &manualStopper{c, t}
}

type manualStopper struct {
	c *manualClock
	t *manualTimer
}

func (s *manualStopper) Stop() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.t.fired || s.t.stopped {
		return false
	}
	s.t.stopped = true
	return true
}

// take marks every live timer fired and returns their callbacks.
func (c *manualClock) take() []func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fs []func()
	for _, t := range c.timers {
		if !t.fired && !t.stopped {
			t.fired = true
			fs = append(fs, t.f)
		}
	}
	return fs
}

// TestCloseWaitsForFiredTimers: a timer that fired before Close but whose
// callback has not run yet is waited for; the callback then does nothing.
func TestCloseWaitsForFiredTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &manualClock{}
		c, err := group.New(group.Config{Clock: clock, Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		_, err = c.Join(context.Background(), req("a", "a"))
		require.NoError(t, err)
		fired := clock.take() // the session timer: "fired", its callback not yet run
		require.Len(t, fired, 1)
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned before a fired timer's callback ran")
		default:
		}
		fired[0]()
		<-closed
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 1, "a callback run after Close changed the group")
	})
}

// TestNoGoroutineLeak: on the system clock, outside any bubble, a
// coordinator with members, pending joins and armed timers leaves no
// goroutine behind after Close.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Join(ctx, req("a", "a"))
	require.NoError(t, err)
	ch := joinAsync(ctx, c, req("b", "a"))
	require.NoError(t, c.Close())
	require.ErrorIs(t, (<-ch).err, group.ErrClosed)
	leaktest.Wait(t, before)
}
