package log

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

// shareBroker is consBroker with share group g reading from the start.
func shareBroker(t *testing.T, n int) *Broker {
	t.Helper()
	b := consBroker(t, n)
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	return b
}

func newShareT(t *testing.T, b *Broker, cfg ShareConsumerConfig) *ShareConsumer {
	t.Helper()
	if cfg.Group == "" {
		cfg.Group, cfg.Topics = "g", []string{"t"}
	}
	c, err := NewShareConsumer(b, cfg)
	require.NoError(t, err)
	return c
}

// TestShareConsumersShareTheRecords: three members of a share group
// accept each record of two partitions exactly once between them, each
// getting some; the share-partitions end past every record.
func TestShareConsumersShareTheRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 2)
		for p := range 2 {
			consAppend(t, b, p, 300)
		}
		var (
			mu   sync.Mutex
			seen = map[TopicPartition]map[int64]int{}
			per  = map[string]int{}
			wg   sync.WaitGroup
		)
		total := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, m := range seen {
				n += len(m)
			}
			return n
		}
		for range 3 {
			c := newShareT(t, b, ShareConsumerConfig{MaxRecords: 7})
			wg.Go(func() {
				for total() < 600 {
					recs, err := c.Poll(ctx)
					require.NoError(t, err)
					mu.Lock()
					for _, r := range recs {
						tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
						if seen[tp] == nil {
							seen[tp] = map[int64]int{}
						}
						seen[tp][r.Offset]++
						per[c.MemberID()]++
						require.Equal(t, 1, r.DeliveryCount)
						require.Equal(t, "k", string(r.Key))
					}
					mu.Unlock()
					for _, r := range recs {
						require.NoError(t, r.Accept())
					}
					time.Sleep(time.Millisecond) // virtual time: let the others in
				}
				require.NoError(t, c.Close(ctx))
			})
		}
		wg.Wait()
		for p := range 2 {
			m := seen[TopicPartition{Topic: "t", Partition: p}]
			require.Len(t, m, 300)
			for off, n := range m {
				require.Equal(t, 1, n, "offset %d of %d delivered %d times", off, p, n)
			}
			st := b.ShareCoordinator().Offsets("g")[TopicPartition{Topic: "t", Partition: p}]
			require.Equal(t, int64(300), st.StartOffset)
		}
		require.Len(t, per, 3)
		d, ok := b.ShareCoordinator().Describe("g")
		require.True(t, ok)
		require.Empty(t, d.Members, "closed members left")
	})
}

// TestShareConsumerAcknowledgeTypes: explicit mode refuses a Poll with
// records unacknowledged; a released record comes again with delivery
// count 2, a rejected one never; an acknowledgement twice is refused.
func TestShareConsumerAcknowledgeTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 1)
		consAppend(t, b, 0, 5)
		c := newShareT(t, b, ShareConsumerConfig{ExplicitAck: true})
		var recs []ShareRecord
		for len(recs) == 0 {
			var err error
			recs, err = c.Poll(ctx)
			require.NoError(t, err)
		}
		require.Len(t, recs, 5)
		_, err := c.Poll(ctx)
		require.ErrorIs(t, err, ErrUnacknowledged)
		require.NoError(t, recs[0].Release())
		require.NoError(t, recs[1].Reject())
		require.ErrorIs(t, recs[1].Accept(), ErrUnacknowledged)
		for _, r := range recs[2:] {
			require.NoError(t, r.Accept())
		}
		again, err := c.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, int64(0), again[0].Offset)
		require.Equal(t, 2, again[0].DeliveryCount)
		require.ErrorIs(t, recs[2].Accept(), ErrUnacknowledged, "a record of an earlier Poll")
		require.NoError(t, again[0].Accept())
		require.NoError(t, c.Commit(ctx))
		st := b.ShareCoordinator().Offsets("g")[TopicPartition{Topic: "t"}]
		require.Equal(t, int64(5), st.StartOffset)
		require.NoError(t, c.Close(ctx))
		require.ErrorIs(t, again[0].Accept(), ErrClosed)
		_, err = c.Poll(ctx)
		require.ErrorIs(t, err, ErrClosed)

		_, err = NewShareConsumer(b, ShareConsumerConfig{Topics: []string{"t"}})
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewShareConsumer(b, ShareConsumerConfig{Group: "g"})
		require.ErrorIs(t, err, ErrInvalidConfig)
	})
}

// TestShareConsumerLockExpiryAndClose: a member that stops acknowledging
// loses its records when their lock expires (30 s): another member gets
// them at delivery count 2 and the late acceptance is refused; a member
// that closes releases what it holds to the others at once.
func TestShareConsumerLockExpiryAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 1)
		consAppend(t, b, 0, 10)
		stuck := newShareT(t, b, ShareConsumerConfig{})
		var held []ShareRecord
		for len(held) == 0 {
			var err error
			held, err = stuck.Poll(ctx)
			require.NoError(t, err)
		}
		require.Len(t, held, 10)

		other := newShareT(t, b, ShareConsumerConfig{})
		start := time.Now()
		var got []ShareRecord
		for len(got) == 0 {
			var err error
			got, err = other.Poll(ctx)
			require.NoError(t, err)
		}
		require.GreaterOrEqual(t, time.Since(start), 29*time.Second, "redelivered only once the lock expired")
		require.Len(t, got, 10)
		require.Equal(t, 2, got[0].DeliveryCount)
		// The stuck member's acceptance comes too late.
		require.NoError(t, held[0].Accept())
		_, err := stuck.Poll(ctx)
		require.ErrorIs(t, err, share.ErrInvalidRecordState)

		// other closes holding the records: a third member gets them now.
		require.NoError(t, other.Close(ctx))
		third := newShareT(t, b, ShareConsumerConfig{})
		start = time.Now()
		var again []ShareRecord
		for len(again) == 0 {
			again, err = third.Poll(ctx)
			require.NoError(t, err)
		}
		require.Less(t, time.Since(start), 10*time.Second)
		require.Len(t, again, 10)
		require.Equal(t, 3, again[0].DeliveryCount)
		require.NoError(t, third.Close(ctx))
		require.NoError(t, stuck.Close(ctx))
		st := b.ShareCoordinator().Offsets("g")[TopicPartition{Topic: "t"}]
		require.Equal(t, int64(0), st.StartOffset, "nothing accepted")
		require.Equal(t, 10, st.Available)
	})
}

// TestShareConsumerGaps: offsets with no record (transaction markers, in
// the middle and at the end of what is acquired) are acknowledged as
// gaps, so the share-partition's start moves past them once the records
// around them are accepted.
func TestShareConsumerGaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 1)
		p, err := b.Partition("t", 0)
		require.NoError(t, err)
		marker := func() {
			_, err := p.AppendMarker(batch.Marker{Commit: true, ProducerID: 7})
			require.NoError(t, err)
		}
		consAppend(t, b, 0, 3) // 0-2
		marker()               // 3
		consAppend(t, b, 0, 3) // 4-6
		marker()               // 7
		c := newShareT(t, b, ShareConsumerConfig{})
		var recs []ShareRecord
		for len(recs) == 0 {
			recs, err = c.Poll(ctx)
			require.NoError(t, err)
		}
		var offs []int64
		for _, r := range recs {
			offs = append(offs, r.Offset)
		}
		require.Equal(t, []int64{0, 1, 2, 4, 5, 6}, offs)
		require.NoError(t, c.Close(ctx)) // releases the six
		st := b.ShareCoordinator().Offsets("g")[TopicPartition{Topic: "t"}]
		require.Equal(t, 6, st.Available)
		require.Equal(t, 2, st.Archived, "the markers, acknowledged as gaps")

		c = newShareT(t, b, ShareConsumerConfig{})
		recs = nil
		for len(recs) == 0 {
			recs, err = c.Poll(ctx)
			require.NoError(t, err)
		}
		require.Len(t, recs, 6)
		require.NoError(t, c.Close(ctx)) // never acknowledged by hand: Close releases...
		c = newShareT(t, b, ShareConsumerConfig{})
		for recs = nil; len(recs) == 0; {
			recs, err = c.Poll(ctx)
			require.NoError(t, err)
		}
		_, err = c.Poll(ctx) // ...but a Poll accepts them (implicit mode)
		require.NoError(t, err)
		st = b.ShareCoordinator().Offsets("g")[TopicPartition{Topic: "t"}]
		require.Equal(t, int64(8), st.StartOffset, "past the records and both gaps")
		require.NoError(t, c.Close(ctx))
	})
}

// TestShareConsumerAckAfterLockExpired: an acceptance sent after the
// record's lock expired fails as a *ShareAckError matching
// share.ErrInvalidRecordState; the Poll that carried it hands out nothing
// and the records its fetch acquired are released with the next Poll, so
// the record comes back.
func TestShareConsumerAckAfterLockExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 1)
		require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest", LockDuration: time.Second}))
		consAppend(t, b, 0, 1)
		c := newShareT(t, b, ShareConsumerConfig{MaxWait: 10 * time.Millisecond})
		defer c.Close(ctx)
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.NoError(t, recs[0].Accept())
		time.Sleep(2 * time.Second) // virtual: the lock expires
		recs, err = c.Poll(ctx)
		require.Empty(t, recs)
		var ae *ShareAckError
		require.ErrorAs(t, err, &ae)
		require.ErrorIs(t, err, share.ErrInvalidRecordState)
		require.Contains(t, ae.Partitions, TopicPartition{Topic: "t"})
		recs, err = c.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, 3, recs[0].DeliveryCount, "acquired by the failed Poll, released, acquired again")
	})
}

// TestShareConsumerLeavesWhenNotPolled: a member that stops polling
// without Close (a worker stuck or gone) keeps heartbeating, and the
// assignor may leave a partition to it alone: no other member fetches
// from it. After MaxPollInterval (Kafka's max.poll.interval.ms, 5 min)
// it leaves the group, as Kafka's share consumer does: the other member
// gets every record, those the stuck one held at delivery 2, and the
// stuck member's next Poll joins again. (examples/workqueue hung on
// this: its killed worker was the only one assigned a partition.)
func TestShareConsumerLeavesWhenNotPolled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := shareBroker(t, 2)
		const n = 20
		for p := range 2 {
			consAppend(t, b, p, n)
		}
		start := time.Now()
		stuck := newShareT(t, b, ShareConsumerConfig{MaxRecords: 5})
		var held []ShareRecord
		for len(held) == 0 {
			var err error
			held, err = stuck.Poll(ctx)
			require.NoError(t, err)
		}
		require.Len(t, held, 5)

		other := newShareT(t, b, ShareConsumerConfig{MaxRecords: 5})
		got := map[TopicPartition]map[int64]int{} // delivery count by offset
		for total := 0; total < 2*n && time.Since(start) < 2*DefaultShareMaxPollInterval; {
			recs, err := other.Poll(ctx)
			require.NoError(t, err)
			for _, r := range recs {
				tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
				if got[tp] == nil {
					got[tp] = map[int64]int{}
				}
				require.NotContains(t, got[tp], r.Offset, "%s@%d delivered twice", tp, r.Offset)
				got[tp][r.Offset] = r.DeliveryCount
				total++
				require.NoError(t, r.Accept())
			}
		}
		for p := range 2 {
			require.Len(t, got[TopicPartition{Topic: "t", Partition: p}], n, "partition %d: every record to the member that polls", p)
		}
		for _, r := range held {
			require.Equal(t, 2, got[TopicPartition{Topic: r.Topic, Partition: r.Partition}][r.Offset], "%d held by the stuck member: delivery 2", r.Offset)
		}
		d, ok := b.ShareCoordinator().Describe("g")
		require.True(t, ok)
		require.Len(t, d.Members, 1, "the stuck member left")
		require.Equal(t, other.MemberID(), d.Members[0].MemberID)
		require.GreaterOrEqual(t, time.Since(start), DefaultShareMaxPollInterval, "not before MaxPollInterval")

		// Its acceptance comes too late; the Poll joins the group again.
		require.NoError(t, held[0].Accept())
		_, err := stuck.Poll(ctx)
		require.ErrorIs(t, err, share.ErrInvalidRecordState)
		d, _ = b.ShareCoordinator().Describe("g")
		require.Len(t, d.Members, 2, "joined again")
		require.NoError(t, stuck.Close(ctx))
		require.NoError(t, other.Close(ctx))
	})
}
