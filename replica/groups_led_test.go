package replica

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeLoads is a ledLoader whose loads block until the test lets each one
// end, and which records what is opened and closed.
type fakeLoads struct {
	t      *testing.T
	opened chan string // "key@epoch", as each open starts
	mu     sync.Mutex
	gate   map[int]chan error // the release of key's open in progress
	closed []string
}

func newFakeLoads(t *testing.T) *fakeLoads {
	return &fakeLoads{t: t, opened: make(chan string, 16), gate: map[int]chan error{}}
}

func (f *fakeLoads) loader() *ledLoader[int, string] {
	return &ledLoader[int, string]{
		what: "fake",
		open: func(ctx context.Context, k int, epoch int32) (string, error) {
			f.mu.Lock()
			g := make(chan error, 1)
			f.gate[k] = g
			f.mu.Unlock()
			name := fmt.Sprintf("%d@%d", k, epoch)
			f.opened <- name
			// Not cancelled by ctx: a slow read that ends in its own time.
			if err := <-g; err != nil {
				return "", err
			}
			return name, nil
		},
		close: func(_ int, c string) {
			f.mu.Lock()
			f.closed = append(f.closed, c)
			f.mu.Unlock()
		},
		compare: cmp.Compare[int],
		backoff: time.Millisecond, maxBackoff: time.Millisecond,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// release ends key's open in progress with err.
func (f *fakeLoads) release(k int, err error) {
	f.mu.Lock()
	g := f.gate[k]
	f.mu.Unlock()
	g <- err
}

func (f *fakeLoads) nextOpen() string {
	f.t.Helper()
	select {
	case s := <-f.opened:
		return s
	case <-time.After(30 * time.Second):
		f.t.Fatal("no load started")
		return ""
	}
}

func (f *fakeLoads) closes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closed...)
}

// awaitLoaded waits until every goroutine of the bubble is blocked, and
// returns k's coordinator, which must be loaded in epoch.
func awaitLoaded(t *testing.T, s *ledCoordinators[int, string], k int, epoch int32) string {
	t.Helper()
	synctest.Wait()
	c, _, loaded := s.get(k, epoch)
	require.True(t, loaded, "%d not loaded in epoch %d", k, epoch)
	return c
}

// A coordinator is loaded in the background for each led key, answered
// only once loaded in the current epoch, retried after a failed load,
// closed when the key is no longer led or led in a new epoch, and all are
// closed by stop.
func TestLedCoordinatorsLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLoads(t)
		l := f.loader()
		var s ledCoordinators[int, string]
		ctx := t.Context()

		_, started := s.sync(ctx, map[int]int32{2: 0, 1: 0}, l)
		require.Equal(t, []int{1, 2}, started)
		opens := []string{f.nextOpen(), f.nextOpen()}
		require.ElementsMatch(t, []string{"1@0", "2@0"}, opens)
		_, found, loaded := s.get(1, 0)
		require.True(t, found)
		require.False(t, loaded, "answered while loading")

		f.release(1, nil)
		f.release(2, fmt.Errorf("read failed"))
		require.Equal(t, "2@0", f.nextOpen(), "a failed load is tried again")
		f.release(2, nil)
		require.Equal(t, "1@0", awaitLoaded(t, &s, 1, 0))
		require.Equal(t, "2@0", awaitLoaded(t, &s, 2, 0))
		require.Equal(t, []string{"1@0", "2@0"}, s.loaded(cmp.Compare[int]))
		_, found, _ = s.get(1, 1)
		require.False(t, found, "another epoch")

		// 1 in a new epoch, 2 no longer led: both closed before sync returns.
		stopped, started := s.sync(ctx, map[int]int32{1: 1}, l)
		require.Equal(t, []int{1, 2}, stopped)
		require.Equal(t, []int{1}, started)
		require.Equal(t, []string{"1@0", "2@0"}, f.closes())
		require.Equal(t, "1@1", f.nextOpen())
		f.release(1, nil)
		require.Equal(t, "1@1", awaitLoaded(t, &s, 1, 1))

		s.stop(l)
		require.Equal(t, []string{"1@0", "2@0", "1@1"}, f.closes())
		_, started = s.sync(ctx, map[int]int32{3: 0}, l)
		require.Empty(t, started, "nothing starts after stop")
	})
}

// A load superseded while it reads closes what it read, and the key's
// next load starts only once it has ended: two loads of a key never read
// (or install) at once.
func TestLedCoordinatorsSupersededLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLoads(t)
		l := f.loader()
		var s ledCoordinators[int, string]
		defer s.stop(l)
		ctx := t.Context()

		s.sync(ctx, map[int]int32{5: 0}, l)
		require.Equal(t, "5@0", f.nextOpen())
		s.sync(ctx, map[int]int32{5: 1}, l) // led again in a new epoch while the first loads
		synctest.Wait()
		select {
		case o := <-f.opened:
			t.Fatalf("%s opened while the superseded load still reads", o)
		default:
		}
		f.release(5, nil) // the first load ends: superseded, it closes what it read
		require.Equal(t, "5@1", f.nextOpen())
		require.Equal(t, []string{"5@0"}, f.closes(), "closed before the next load starts")
		_, found, _ := s.get(5, 0)
		require.False(t, found)
		f.release(5, nil)
		require.Equal(t, "5@1", awaitLoaded(t, &s, 5, 1))
	})
}

// reload closes a loaded coordinator in the background and syncs again,
// which loads it anew in the same epoch.
func TestLedCoordinatorsReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeLoads(t)
		l := f.loader()
		var s ledCoordinators[int, string]
		defer s.stop(l)
		ctx := t.Context()
		want := map[int]int32{7: 3}

		s.sync(ctx, want, l)
		require.Equal(t, "7@3", f.nextOpen())
		f.release(7, nil)
		awaitLoaded(t, &s, 7, 3)

		s.reload(7, l, func() { s.sync(ctx, want, l) })
		require.Equal(t, "7@3", f.nextOpen(), "loaded again")
		require.Equal(t, []string{"7@3"}, f.closes(), "closed before the new load")
		f.release(7, nil)
		awaitLoaded(t, &s, 7, 3)
		s.reload(8, l, func() { t.Error("reload of a key not led") })
	})
}
