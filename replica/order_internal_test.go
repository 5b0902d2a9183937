package replica

import (
	"context"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

func TestSeqArithmetic(t *testing.T) {
	require.Equal(t, int32(5), seqAdd(0, 5))
	require.Equal(t, int32(2), seqAdd(math.MaxInt32-2, 5), "wraps to 0 after MaxInt32")
	require.True(t, seqAfter(5, 0))
	require.False(t, seqAfter(0, 5))
	require.False(t, seqAfter(3, 3))
	require.True(t, seqAfter(2, math.MaxInt32-2), "after, across the wrap")
	require.False(t, seqAfter(math.MaxInt32-2, 2))
}

var orderTP = log.TopicPartition{Topic: "t", Partition: 0}

// TestProduceOrderReorders: attempts that come out of sequence order go in
// it; each goes once the one before it has its place, not once it returns.
func TestProduceOrderReorders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := produceOrder{clock: clock.System()}
		k := orderKey{tp: orderTP, pid: 7}
		went := make(chan int32, 3)
		enter := func(seq int32) (context.Context, func()) {
			ctx, done := o.enter(context.Background(), k, seq, 5)
			went <- seq
			return ctx, done
		}
		ctx0, done0 := enter(0) // the first of the lane goes
		require.Equal(t, int32(0), <-went)
		// 10 and 5 come next: they wait for 0 to have its place.
		go func() { _, done := enter(10); done() }()
		ctx5 := make(chan context.Context, 1)
		release5 := make(chan struct{})
		go func() {
			ctx, done := enter(5)
			ctx5 <- ctx
			<-release5 // held, as an acks=all produce waiting for the ISR
			done()
		}()
		synctest.Wait()
		require.Empty(t, went, "5 and 10 wait for 0")

		order.Placed(ctx0) // 0 is appended; its answer is still to come
		require.Equal(t, int32(5), <-went)
		synctest.Wait()
		require.Empty(t, went, "10 waits for 5")
		c5, cancel5 := context.WithCancel(<-ctx5)
		defer cancel5()
		order.Placed(c5) // derived from 5's: gives 5 its place too
		require.Equal(t, int32(10), <-went)
		close(release5)
		done0()
		synctest.Wait()

		// A retry of a batch already placed goes at once.
		_, done := enter(0)
		require.Equal(t, int32(0), <-went)
		done()
	})
}

// TestProduceOrderGap: a batch whose predecessor never comes goes after
// orderWait; a lane starts wherever its first batch is (a producer that
// wrote through another member); an attempt that ended without a place
// moves the lane on anyway.
func TestProduceOrderGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := produceOrder{clock: clock.System()}
		k := orderKey{tp: orderTP, pid: 8}
		start := time.Now()
		_, done := o.enter(context.Background(), k, 300, 2)
		require.Zero(t, time.Since(start), "the lane's first batch goes")
		done() // no place given: the return gives it
		start = time.Now()
		_, done = o.enter(context.Background(), k, 302, 1)
		require.Zero(t, time.Since(start), "302 follows 300..301")
		done()
		start = time.Now()
		_, done = o.enter(context.Background(), k, 310, 1)
		require.Equal(t, orderWait, time.Since(start), "waited for 303..309, which never came")
		done()

		// An ended context stops the wait.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start = time.Now()
		_, done = o.enter(ctx, k, 400, 1)
		require.Zero(t, time.Since(start))
		done()
	})
}

func TestOrderOf(t *testing.T) {
	_, _, _, ok := orderOf(orderTP, []byte("short"))
	require.False(t, ok, "not a batch")
	var bd batch.Builder
	bd.Reset(1)
	for range 3 {
		bd.Append(1, nil, []byte("v"), nil)
	}
	raw := slices.Clone(bd.Bytes())
	_, _, _, ok = orderOf(orderTP, raw)
	require.False(t, ok, "not idempotent")
	batch.SetProducer(raw, 42, 3, 17)
	k, seq, n, ok := orderOf(orderTP, raw)
	require.True(t, ok)
	require.Equal(t, orderKey{tp: orderTP, pid: 42, epoch: 3}, k)
	require.Equal(t, int32(17), seq)
	require.Equal(t, int32(3), n)
}

// TestProduceOrderClock: the wait for a missing predecessor runs on the
// member's clock (Config.Clock), not the wall clock: in a bubble whose
// time stands still, it ends when that clock passes orderWait.
func TestProduceOrderClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktest.New(time.Unix(1000, 0))
		o := produceOrder{clock: clk}
		k := orderKey{tp: orderTP, pid: 9}
		_, done := o.enter(context.Background(), k, 0, 1)
		done()
		entered := make(chan struct{})
		go func() {
			_, done := o.enter(context.Background(), k, 5, 1) // 1..4 never come
			done()
			close(entered)
		}()
		gone := func() bool {
			synctest.Wait()
			select {
			case <-entered:
				return true
			default:
				return false
			}
		}
		require.False(t, gone(), "waits for 1..4")
		require.Equal(t, 1, clk.Pending(), "on the member's clock")
		clk.Advance(orderWait - time.Millisecond)
		require.False(t, gone(), "before orderWait on the clock")
		clk.Advance(time.Millisecond)
		require.True(t, gone(), "at orderWait on the clock")
		o.mu.Lock()
		defer o.mu.Unlock()
		require.Equal(t, clk.Now(), o.lanes[k].used, "lanes age on the member's clock")
	})
}
