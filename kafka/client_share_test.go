package kafka

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

func shareConsumerOver(t *testing.T, cl *Client, cfg log.ShareConsumerConfig) *log.ShareConsumer {
	t.Helper()
	cfg.Group, cfg.Topics = "g", []string{"t"}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	c, err := log.NewShareConsumer(cl, cfg)
	require.NoError(t, err)
	return c
}

// pollUntil polls c until cond holds of what it got, within a generous
// time.
func pollUntil(t *testing.T, c *log.ShareConsumer, got func([]log.ShareRecord) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		if got(recs) {
			return
		}
	}
}

// TestClientShareConsumers: two log.ShareConsumers over one kafka.Client
// against a Strata server share four partitions with transaction markers
// among the records: each record is accepted once, the markers are
// acknowledged as gaps (over the wire, with the session's next request),
// a released record comes back at delivery count 2, and every
// share-partition ends past its last offset.
func TestClientShareConsumers(t *testing.T) {
	leaktest.Check(t)
	const parts, n = 4, 50
	s, b, _ := start(t, Config{}, logtest.Topic("t", parts))
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	appendValues(t, b, parts, n/2, "a")
	for p := range parts {
		part, err := b.Partition("t", p)
		require.NoError(t, err)
		_, err = part.AppendMarker(batch.Marker{Commit: true, ProducerID: 7})
		require.NoError(t, err)
	}
	appendValues(t, b, parts, n/2, "b")
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()

	c1 := shareConsumerOver(t, cl, log.ShareConsumerConfig{MaxRecords: 7})
	c2 := shareConsumerOver(t, cl, log.ShareConsumerConfig{MaxRecords: 7})
	var (
		mu       sync.Mutex
		accepted = map[log.TopicPartition]map[int64]int{}
		released bool
		again    int // the released record's delivery count when it came back
		relAt    log.TopicPartition
		relOff   int64
	)
	total := func() int {
		n := 0
		for _, m := range accepted {
			n += len(m)
		}
		return n
	}
	var wg sync.WaitGroup
	for _, c := range []*log.ShareConsumer{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for {
				recs, err := c.Poll(ctx)
				if err != nil {
					t.Errorf("poll: %v", err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					tp := log.TopicPartition{Topic: r.Topic, Partition: r.Partition}
					if !released {
						released, relAt, relOff = true, tp, r.Offset
						require.Equal(t, 1, r.DeliveryCount)
						require.NoError(t, r.Release())
						continue
					}
					if tp == relAt && r.Offset == relOff {
						again = r.DeliveryCount
					}
					if accepted[tp] == nil {
						accepted[tp] = map[int64]int{}
					}
					accepted[tp][r.Offset]++
					require.NoError(t, r.Accept())
				}
				done := total() == parts*n
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	for tp, m := range accepted {
		for off, k := range m {
			require.Equal(t, 1, k, "%s@%d accepted once", tp, off)
			require.NotEqual(t, int64(n/2), off, "the marker is no record")
		}
	}
	require.Equal(t, 2, again, "the released record came back at delivery count 2")
	// The last acceptances and gaps go with the next requests: Close
	// sends them.
	require.NoError(t, c1.Close(ctx))
	require.NoError(t, c2.Close(ctx))
	for p := range parts {
		st := b.ShareCoordinator().Offsets("g")[log.TopicPartition{Topic: "t", Partition: p}]
		require.Equal(t, int64(n+1), st.StartOffset, "partition %d: past every record and the marker", p)
	}
}

// freezable is a connection that can be frozen as a hung process's:
// what is written after is dropped and nothing more is read, while the
// connection stays open at the broker.
type freezable struct {
	net.Conn
	frozen <-chan struct{}
}

func (f *freezable) Write(p []byte) (int, error) {
	select {
	case <-f.frozen:
		return len(p), nil
	default:
		return f.Conn.Write(p)
	}
}

func (f *freezable) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	select {
	case <-f.frozen:
		// Hung: read nothing more until the connection closes.
		for err == nil {
			_, err = f.Conn.Read(p)
		}
		return 0, err
	default:
		return n, err
	}
}

// TestClientShareConsumerKilledMidBatch: a member over the wire takes a
// batch, accepts half of it and hangs (its connections stay open, so the
// broker releases nothing on a disconnect); once the locks expire the
// other member gets the other half, at delivery count 2, and never one
// of the accepted records: every record is accepted once.
func TestClientShareConsumerKilledMidBatch(t *testing.T) {
	leaktest.Check(t)
	const n = 20
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest", LockDuration: time.Second}))
	appendValues(t, b, 1, n, "a")
	ctx := context.Background()
	freeze := make(chan struct{})
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &freezable{Conn: nc, frozen: freeze}, nil
	}
	clA, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}, Dial: dial})
	require.NoError(t, err)
	defer clA.Close()
	clB, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer clB.Close()

	a := shareConsumerOver(t, clA, log.ShareConsumerConfig{MaxRecords: 10, ExplicitAck: true})
	var batchA []log.ShareRecord
	pollUntil(t, a, func(recs []log.ShareRecord) bool { batchA = recs; return len(recs) > 0 })
	require.Len(t, batchA, 10)
	accepted := map[int64]int{}
	for _, r := range batchA[:5] {
		require.NoError(t, r.Accept())
		accepted[r.Offset]++
	}
	require.NoError(t, a.Commit(ctx))
	close(freeze) // a hangs mid-batch, holding five records

	bc := shareConsumerOver(t, clB, log.ShareConsumerConfig{})
	redelivered := map[int64]int{}
	pollUntil(t, bc, func(recs []log.ShareRecord) bool {
		for _, r := range recs {
			accepted[r.Offset]++
			if r.DeliveryCount > 1 {
				redelivered[r.Offset] = r.DeliveryCount
			}
			require.NoError(t, r.Accept())
		}
		return len(accepted) == n
	})
	for off, k := range accepted {
		require.Equal(t, 1, k, "offset %d accepted once", off)
	}
	want := map[int64]int{}
	for _, r := range batchA[5:] {
		want[r.Offset] = 2
	}
	require.Equal(t, want, redelivered, "a's unacknowledged half, once its locks expired")
	require.NoError(t, bc.Close(ctx))
	require.Eventually(t, func() bool {
		return b.ShareCoordinator().Offsets("g")[log.TopicPartition{Topic: "t"}].StartOffset == n
	}, 20*time.Second, 10*time.Millisecond)

	require.NoError(t, clA.Close()) // the hung process's end
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Close(cctx); err != nil {
		require.True(t, errors.Is(err, log.ErrClosed) || errors.Is(err, log.ErrUnreachable), "%v", err)
	}
}

// TestClientShareAckAfterLockExpired: an acknowledgement of a record
// whose lock expired fails with share.ErrInvalidRecordState, carried
// back by the Poll that sent it, and the record is delivered again.
func TestClientShareAckAfterLockExpired(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest", LockDuration: time.Second}))
	appendValues(t, b, 1, 1, "a")
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()
	c := shareConsumerOver(t, cl, log.ShareConsumerConfig{})
	defer c.Close(ctx)
	var first log.ShareRecord
	pollUntil(t, c, func(recs []log.ShareRecord) bool {
		if len(recs) > 0 {
			first = recs[0]
		}
		return len(recs) > 0
	})
	require.NoError(t, first.Accept())
	require.Eventually(t, func() bool {
		return b.ShareCoordinator().Offsets("g")[log.TopicPartition{Topic: "t"}].Available == 1
	}, 20*time.Second, 10*time.Millisecond, "the lock expired")
	_, err = c.Poll(ctx)
	require.ErrorIs(t, err, share.ErrInvalidRecordState)
	var ae *log.ShareAckError
	require.ErrorAs(t, err, &ae)
	pollUntil(t, c, func(recs []log.ShareRecord) bool {
		return len(recs) == 1 && recs[0].Offset == first.Offset && recs[0].DeliveryCount >= 2
	})
}

// TestClientShareConsumerMaxRecords: over the wire a ShareConsumer's Poll
// returns at most MaxRecords, as in the process, though the server takes
// whole batches for clients that let it (KIP-1206's record_limit mode).
func TestClientShareConsumerMaxRecords(t *testing.T) {
	leaktest.Check(t)
	s := startShareBatches(t, 4, 10)
	cl, err := Dial(context.Background(), DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()
	c := shareConsumerOver(t, cl, log.ShareConsumerConfig{MaxRecords: 3})
	defer c.Close(context.Background())
	seen := map[int64]bool{}
	pollUntil(t, c, func(recs []log.ShareRecord) bool {
		require.LessOrEqual(t, len(recs), 3)
		for _, r := range recs {
			require.False(t, seen[r.Offset], "offset %d twice", r.Offset)
			seen[r.Offset] = true
			require.NoError(t, r.Accept())
		}
		return len(seen) == 40
	})
}

// TestShareQuotas: a ShareFetch's MaxRecords shared among its leaders,
// in all exactly MaxRecords, the remainder's turn going round.
func TestShareQuotas(t *testing.T) {
	for _, c := range []struct {
		max, n int
		turn   uint64
		want   []int
	}{
		{10, 1, 7, []int{10}},
		{10, 3, 0, []int{4, 3, 3}},
		{10, 3, 1, []int{3, 4, 3}},
		{2, 3, 2, []int{1, 0, 1}},
		{1, 3, 4, []int{0, 1, 0}},
		{5, 0, 0, []int{}},
	} {
		require.Equal(t, c.want, shareQuotas(c.max, c.n, c.turn), "%+v", c)
	}
}
