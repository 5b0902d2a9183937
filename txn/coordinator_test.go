package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/stretchr/testify/require"
)

// memStore is a Store in memory: the records written, in order; fail
// makes the next writes fail.
type memStore struct {
	mu      sync.Mutex
	records [][2][]byte
	fail    int
}

var errStore = errors.New("store down")

func (s *memStore) Write(ctx context.Context, key, value []byte, _ []tp.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errStore
	}
	s.records = append(s.records, [2][]byte{slices.Clone(key), slices.Clone(value)})
	return nil
}

// states returns the states of id's records, in order ("tombstone" for
// nil values).
func (s *memStore) states(t *testing.T, id string) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.records {
		rid, m, err := DecodeRecord(r[0], r[1])
		require.NoError(t, err)
		if rid != id {
			continue
		}
		if m == nil {
			out = append(out, "tombstone")
			continue
		}
		out = append(out, m.State.String())
	}
	return out
}

func (s *memStore) load(yield func(key, value []byte) error) error {
	s.mu.Lock()
	recs := slices.Clone(s.records)
	s.mu.Unlock()
	for _, r := range recs {
		if err := yield(r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}

// memMarkers is a MarkerWriter that records the markers by partition;
// fail makes the next writes fail.
type memMarkers struct {
	mu      sync.Mutex
	written map[tp.TopicPartition][]batch.Marker
	fail    int
	block   bool // fail every write
}

func (w *memMarkers) WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.block {
		return errors.New("leader unavailable")
	}
	if w.fail > 0 {
		w.fail--
		return errors.New("not leader")
	}
	if w.written == nil {
		w.written = map[tp.TopicPartition][]batch.Marker{}
	}
	m.Timestamp = 0
	w.written[p] = append(w.written[p], m)
	return nil
}

func (w *memMarkers) of(p tp.TopicPartition) []batch.Marker {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.written[p])
}

func newTestCoordinator(t *testing.T, tv int16, st *memStore, mk *memMarkers) *Coordinator {
	t.Helper()
	next := int64(1000)
	var mu sync.Mutex
	c, err := New(Config{
		Store: st, Markers: mk, TransactionVersion: tv, CoordinatorEpoch: 7,
		ProducerIDs: func() (int64, error) { mu.Lock(); defer mu.Unlock(); next++; return next - 1, nil },
	}, st.load)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var tpA, tpB = tp.TopicPartition{Topic: "a", Partition: 0}, tp.TopicPartition{Topic: "b", Partition: 3}

func TestCoordinatorCommitAndAbort(t *testing.T) {
	for _, tv := range []int16{0, TV2} {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			st, mk := &memStore{}, &memMarkers{}
			c := newTestCoordinator(t, tv, st, mk)
			pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
			require.NoError(t, err)
			require.Equal(t, ProducerIDEpoch{1000, 0}, pe)
			require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpB, tpA, tpA}, tv))
			require.NoError(t, c.AddOffsets(ctx, "t1", pe.ID, pe.Epoch, 12, tv))
			require.Equal(t, map[tp.TopicPartition]error{tpA: nil, {Topic: "c"}: ErrTransactionAbortable},
				c.VerifyPartitions("t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA, {Topic: "c"}}))
			next, err := c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, tv)
			require.NoError(t, err)
			epoch := pe.Epoch
			if tv >= TV2 {
				epoch++
			}
			require.Equal(t, ProducerIDEpoch{1000, epoch}, next)
			synctest.Wait()
			want := []batch.Marker{{Commit: true, CoordinatorEpoch: 7, ProducerID: 1000, ProducerEpoch: epoch}}
			require.Equal(t, want, mk.of(tpA))
			require.Equal(t, want, mk.of(tpB))
			require.Equal(t, want, mk.of(tp.TopicPartition{Topic: OffsetsTopic, Partition: 12}))
			require.Equal(t, []string{"Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"}, st.states(t, "t1"))
			d, ok := c.Describe("t1")
			require.True(t, ok)
			require.Equal(t, CompleteCommit, d.State)
			require.Equal(t, []Listing{{ID: "t1", ProducerID: 1000, State: CompleteCommit}}, c.List(ListFilter{}))

			// The next transaction is aborted.
			require.NoError(t, c.AddPartitions(ctx, "t1", next.ID, next.Epoch, []tp.TopicPartition{tpA}, tv))
			_, err = c.EndTxn(ctx, "t1", next.ID, next.Epoch, false, tv)
			require.NoError(t, err)
			synctest.Wait()
			require.Len(t, mk.of(tpA), 2)
			require.False(t, mk.of(tpA)[1].Commit)
			require.Len(t, mk.of(tpB), 1, "not in the second transaction")
		})
	}
}

func TestCoordinatorCompleteInline(t *testing.T) {
	// With CompleteInline, EndTxn returns once the markers and the
	// completion are written (the id is idle at once); a marker that fails
	// is retried in the background and EndTxn answers all the same.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{}
		c, err := New(Config{Store: st, Markers: mk, CoordinatorEpoch: 7, CompleteInline: true,
			ProducerIDs: func() (int64, error) { return 1000, nil }}, nil)
		require.NoError(t, err)
		defer c.Close()
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA, tpB}, 0))
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.NoError(t, err)
		want := []batch.Marker{{Commit: true, CoordinatorEpoch: 7, ProducerID: 1000, ProducerEpoch: 0}}
		require.Equal(t, want, mk.of(tpA), "written before EndTxn returned")
		require.Equal(t, want, mk.of(tpB))
		require.Equal(t, []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit"}, st.states(t, "t1"))
		select {
		case <-c.Idle("t1"):
		default:
			t.Fatal("the id is busy after EndTxn returned")
		}

		// The markers fail (their partitions' leader is away): EndTxn
		// answers, and the background retries them and completes the
		// abort.
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA, tpB}, 0))
		mk.mu.Lock()
		mk.block = true
		mk.mu.Unlock()
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, false, 0)
		require.NoError(t, err)
		d, _ := c.Describe("t1")
		require.Equal(t, PrepareAbort, d.State)
		mk.mu.Lock()
		mk.block = false
		mk.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, mk.of(tpA), 2)
		require.Len(t, mk.of(tpB), 2)
		require.False(t, mk.of(tpB)[1].Commit)
		d, _ = c.Describe("t1")
		require.Equal(t, CompleteAbort, d.State)
	})
}

func TestCoordinatorTimeout(t *testing.T) {
	// A producer that stops between AddPartitions and EndTxn: its
	// transaction is aborted at its timeout, at a fencing epoch.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{}
		c := newTestCoordinator(t, 0, st, mk)
		pe, err := c.InitProducerID(ctx, "t1", 10*time.Second, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA}, 0))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		require.Empty(t, mk.of(tpA), "not yet")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, []batch.Marker{{Commit: false, CoordinatorEpoch: 7, ProducerID: pe.ID, ProducerEpoch: pe.Epoch + 1}}, mk.of(tpA))
		require.Equal(t, []string{"Empty", "Ongoing", "PrepareAbort", "CompleteAbort"}, st.states(t, "t1"))
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.ErrorIs(t, err, ErrProducerFenced)
	})
}

func TestCoordinatorRetries(t *testing.T) {
	// Markers that fail are retried; a failed decision write is answered
	// with its error and changes nothing.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{fail: 3}
		c := newTestCoordinator(t, 0, st, mk)
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA}, 0))
		st.mu.Lock()
		st.fail = 1
		st.mu.Unlock()
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.ErrorIs(t, err, errStore)
		d, _ := c.Describe("t1")
		require.Equal(t, Ongoing, d.State)
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.NoError(t, err)
		// While the markers are retried, the transaction is completing.
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.ErrorIs(t, err, ErrConcurrentTransactions)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, mk.of(tpA), 1)
		d, _ = c.Describe("t1")
		require.Equal(t, CompleteCommit, d.State)
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.NoError(t, err, "a retry of the completed commit")
	})
}

func TestCoordinatorFailover(t *testing.T) {
	// The coordinator dies after writing PrepareCommit, before the markers:
	// the next one, loading the records, writes them and completes. A TV2
	// client's transaction keeps its TV2 fields (the retry of its EndTxn
	// is recognized) whatever the coordinator's configured version, which
	// the broker's coordinator leaves at 0.
	for _, tv := range []int16{0, TV2} {
		t.Run(fmt.Sprintf("TransactionVersion %d", tv), func(t *testing.T) { testCoordinatorFailover(t, tv) })
	}
}

func testCoordinatorFailover(t *testing.T, tv int16) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, dead := &memStore{}, &memMarkers{block: true}
		c := newTestCoordinator(t, tv, st, dead)
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA, tpB}, TV2))
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, TV2)
		require.NoError(t, err)
		// Another transactional id, open at the failover: timed out by the
		// next coordinator.
		pe2, err := c.InitProducerID(ctx, "t2", 30*time.Second, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t2", pe2.ID, pe2.Epoch, []tp.TopicPartition{tpB}, TV2))
		require.NoError(t, c.Close())
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch+1, true, TV2)
		require.ErrorIs(t, err, ErrClosed)

		mk := &memMarkers{}
		c2 := newTestCoordinator(t, tv, st, mk)
		synctest.Wait()
		want := []batch.Marker{{Commit: true, CoordinatorEpoch: 7, ProducerID: pe.ID, ProducerEpoch: pe.Epoch + 1}}
		require.Equal(t, want, mk.of(tpA))
		require.Equal(t, []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit"}, st.states(t, "t1"))
		// A retry of the EndTxn the client may not have seen answered.
		next, err := c2.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, TV2)
		require.NoError(t, err)
		require.Equal(t, ProducerIDEpoch{pe.ID, pe.Epoch + 1}, next)

		time.Sleep(31 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"Empty", "Ongoing", "PrepareAbort", "CompleteAbort"}, st.states(t, "t2"))
		require.Len(t, mk.of(tpB), 2)
	})
}

func TestCoordinatorInitFencesOpenTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{}
		c := newTestCoordinator(t, 0, st, mk)
		old, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", old.ID, old.Epoch, []tp.TopicPartition{tpA}, 0))
		// A new instance of the producer: its first try aborts the zombie's
		// transaction and is told to retry.
		_, err = c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.ErrorIs(t, err, ErrConcurrentTransactions)
		synctest.Wait()
		require.Equal(t, []batch.Marker{{CoordinatorEpoch: 7, ProducerID: old.ID, ProducerEpoch: old.Epoch + 1}}, mk.of(tpA))
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.Equal(t, ProducerIDEpoch{old.ID, old.Epoch + 2}, pe)
		require.ErrorIs(t, c.AddPartitions(ctx, "t1", old.ID, old.Epoch, []tp.TopicPartition{tpA}, 0), ErrProducerFenced)
	})
}

func TestCoordinatorList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newTestCoordinator(t, 0, &memStore{}, &memMarkers{})
		for _, id := range []string{"b", "a", "c"} {
			pe, err := c.InitProducerID(ctx, id, time.Minute, nil)
			require.NoError(t, err)
			if id != "c" {
				require.NoError(t, c.AddPartitions(ctx, id, pe.ID, pe.Epoch, []tp.TopicPartition{tpA}, 0))
			}
			time.Sleep(10 * time.Second)
		}
		all := []Listing{{"a", 1001, Ongoing}, {"b", 1000, Ongoing}, {"c", 1002, Empty}}
		require.Equal(t, all, c.List(ListFilter{}))
		require.Equal(t, all[:2], c.List(ListFilter{States: []State{Ongoing, PrepareCommit}}))
		require.Equal(t, all[1:], c.List(ListFilter{ProducerIDs: []int64{1000, 1002, 7}}))
		// b started 30 s ago, a 20 s ago; c has no transaction.
		require.Equal(t, []Listing{all[1], all[2]}, c.List(ListFilter{MinDuration: 25 * time.Second}))
		require.Equal(t, all[1:2], c.List(ListFilter{MinDuration: 25 * time.Second, States: []State{Ongoing}}))
	})
}

func TestCoordinatorContext(t *testing.T) {
	// A request whose ctx ended decides nothing; one that gives up while
	// its write is under way does not cancel the write.
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{delay: time.Second}
		c := newTestCoordinator(t, 0, &memStore{}, &memMarkers{})
		c.cfg.Store = st
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.InitProducerID(done, "t1", time.Minute, nil)
		require.ErrorIs(t, err, context.Canceled)
		_, ok := c.Describe("t1")
		require.False(t, ok)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err, "the write outlives the request's deadline")
		require.Equal(t, int64(1), st.n.Load())
		d, _ := c.Describe("t1")
		require.Equal(t, pe.Epoch, d.ProducerEpoch)
		require.Equal(t, 0, c.ExpireIDs(done, 0))
	})
}

// slowStore takes delay to write, ignoring the ctx but at Close.
type slowStore struct {
	delay time.Duration
	n     atomic.Int64
}

func (s *slowStore) Write(ctx context.Context, key, value []byte, _ []tp.TopicPartition) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	s.n.Add(1)
	return nil
}

func TestCoordinatorExpireAndConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{}
		c := newTestCoordinator(t, 1, st, mk)
		_, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		_, err = c.InitProducerID(ctx, "t2", 16*time.Minute, nil)
		require.ErrorIs(t, err, ErrInvalidTransactionTimeout)
		require.Equal(t, 0, c.ExpireIDs(ctx, time.Hour))
		time.Sleep(time.Hour)
		require.Equal(t, 1, c.ExpireIDs(ctx, time.Hour))
		require.Equal(t, []string{"Empty", "tombstone"}, st.states(t, "t1"))
		_, ok := c.Describe("t1")
		require.False(t, ok)
		require.Empty(t, c.List(ListFilter{}))
		// Loading the log with the tombstone: the id is gone.
		c2 := newTestCoordinator(t, 1, st, mk)
		require.Empty(t, c2.List(ListFilter{}))
	})
	_, err := New(Config{}, nil)
	require.ErrorIs(t, err, ErrConfig)
	st := &memStore{records: [][2][]byte{{EncodeKey("x"), {0, 9}}}}
	_, err = New(Config{Store: st, Markers: &memMarkers{}, ProducerIDs: func() (int64, error) { return 1, nil }}, st.load)
	require.ErrorIs(t, err, ErrCorruptRecord)
}

// Idle is closed once the id's transaction has completed (its markers
// written), not before; a request then proceeds. Close closes it too.
func TestCoordinatorIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{block: true}
		c := newTestCoordinator(t, 0, st, mk)
		select {
		case <-c.Idle("unknown"):
		default:
			t.Fatal("an unknown id is not busy")
		}
		pe, err := c.InitProducerID(ctx, "t1", time.Minute, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA}, 0))
		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, true, 0)
		require.NoError(t, err)
		idle := c.Idle("t1")
		synctest.Wait()
		select {
		case <-idle:
			t.Fatal("idle while the markers are not written")
		default:
		}
		require.ErrorIs(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpB}, 0), ErrConcurrentTransactions)

		mk.mu.Lock()
		mk.block = false
		mk.mu.Unlock()
		<-idle // the marker retry (after RetryBackoff) completes the transaction
		meta, ok := c.Describe("t1")
		require.True(t, ok)
		require.Equal(t, CompleteCommit, meta.State)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpB}, 0))

		_, err = c.EndTxn(ctx, "t1", pe.ID, pe.Epoch, false, 0)
		require.NoError(t, err)
		mk.mu.Lock()
		mk.block = true
		mk.mu.Unlock()
		// Whether or not the abort's marker got out first, Close wakes the waiter.
		idle = c.Idle("t1")
		require.NoError(t, c.Close())
		<-idle
	})
}

func TestCoordinatorAbortCheck(t *testing.T) {
	// With AbortCheck (transaction.abort.timed.out.transaction.cleanup.interval.ms)
	// a timed-out transaction is aborted at the first tick of the check
	// after its deadline, not at the deadline.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, mk := &memStore{}, &memMarkers{}
		c, err := New(Config{Store: st, Markers: mk, CoordinatorEpoch: 7, AbortCheck: 10 * time.Second,
			ProducerIDs: func() (int64, error) { return 1000, nil }}, nil)
		require.NoError(t, err)
		defer c.Close()
		require.Zero(t, time.Now().UnixMilli()%10000, "synctest starts on a tick")
		time.Sleep(3 * time.Second)
		pe, err := c.InitProducerID(ctx, "t1", 10*time.Second, nil)
		require.NoError(t, err)
		require.NoError(t, c.AddPartitions(ctx, "t1", pe.ID, pe.Epoch, []tp.TopicPartition{tpA}, 0))
		time.Sleep(16 * time.Second) // 19 s: past the deadline (13 s), before the tick (20 s)
		synctest.Wait()
		require.Empty(t, mk.of(tpA), "not before the check's tick")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Len(t, mk.of(tpA), 1, "aborted at the tick")
		require.Equal(t, []string{"Empty", "Ongoing", "PrepareAbort", "CompleteAbort"}, st.states(t, "t1"))
	})
	_, err := New(Config{Store: &memStore{}, Markers: &memMarkers{}, AbortCheck: -1,
		ProducerIDs: func() (int64, error) { return 1, nil }}, nil)
	require.ErrorIs(t, err, ErrConfig)
}
