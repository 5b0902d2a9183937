package log

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/vfs"
)

// TestShareStateIsDurable: a share group's acknowledgements go to
// __share_group_state and come back after a reopen and after a crash; the
// internal topic is neither listed nor user-creatable; the group's
// configuration is kept in share_group_configs.json.
func TestShareStateIsDurable(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	tp, err := b.CreateTopic("t", TopicConfig{Partitions: 1, FlushMessages: 1})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, 1, 10)
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	require.ErrorIs(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "sometimes"}), ErrInvalidConfig)

	sc := b.ShareCoordinator()
	resp, err := sc.Heartbeat(ctx, share.HeartbeatRequest{Group: "g", MemberID: "m1", SubscribedTopics: []string{"t"}})
	require.NoError(t, err)
	require.Len(t, resp.Assignment, 1)
	t0 := TopicPartition{Topic: "t"}
	rs, err := sc.Acquire(ctx, "g", "m1", t0, 6)
	require.NoError(t, err)
	require.Equal(t, []share.AcquiredRange{{First: 0, Last: 5, DeliveryCount: 1}}, rs)
	require.NoError(t, sc.Acknowledge(ctx, "g", "m1", t0, []share.AckBatch{{First: 0, Last: 3, Types: []share.AckType{share.AckAccept}}}))

	require.Equal(t, []string{"t"}, b.Topics())
	_, err = b.CreateTopic(ShareStateTopic, TopicConfig{})
	require.ErrorIs(t, err, ErrInvalidTopic)
	require.ErrorIs(t, b.DeleteTopic(ShareStateTopic), ErrInvalidTopic)
	// A share heartbeat to a classic group's id is refused.
	_, err = b.JoinGroup(ctx, group.JoinRequest{Group: "classic", Topics: []string{"t"}})
	require.NoError(t, err)
	_, err = sc.Heartbeat(ctx, share.HeartbeatRequest{Group: "classic", MemberID: "m1", SubscribedTopics: []string{"t"}})
	require.ErrorIs(t, err, share.ErrGroupNotFound)

	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	for _, fs := range []vfs.FS{fs, crashed} {
		b = openT(t, fs, "/d")
		st := b.ShareCoordinator().Offsets("g")[t0]
		require.Equal(t, int64(4), st.StartOffset)
		require.Equal(t, 0, st.Acquired, "a lock does not outlive the broker")
		require.Equal(t, share.GroupConfig{AutoOffsetReset: "earliest"}, b.ShareCoordinator().GroupConfig("g"))
		rs, err := b.ShareCoordinator().Acquire(ctx, "g", "m2", t0, 100)
		require.NoError(t, err)
		require.Equal(t, []share.AcquiredRange{{First: 4, Last: 9, DeliveryCount: 1}}, rs)
		require.Equal(t, 30*time.Second, b.ShareCoordinator().LockDuration("g"))
		require.NoError(t, b.Close())
	}
}

// TestShareStateIsPruned: once every share-partition has a snapshot past
// them, the records of __share_group_state before it are dropped, and
// what is left restores the same state.
func TestShareStateIsPruned(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	tp, err := b.CreateTopic("t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, 1, 1200)
	sc := b.ShareCoordinator()
	require.NoError(t, sc.SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	t0 := TopicPartition{Topic: "t"}
	for range 1100 { // one update record each, a snapshot every 500
		rs, err := sc.Acquire(ctx, "g", "m1", t0, 1)
		require.NoError(t, err)
		require.NoError(t, sc.Acknowledge(ctx, "g", "m1", t0, []share.AckBatch{{First: rs[0].First, Last: rs[0].Last, Types: []share.AckType{share.AckAccept}}}))
	}
	st, err := b.Partition(ShareStateTopic, 0)
	require.NoError(t, err)
	require.Greater(t, st.StartOffset(), int64(900), "records before the latest snapshot dropped")
	require.NoError(t, b.Close())
	b = openT(t, fs, "/d")
	defer b.Close()
	require.Equal(t, int64(1100), b.ShareCoordinator().Offsets("g")[t0].StartOffset)
}

// TestShareStateLogGroupCommit: Appends from many goroutines at once go
// out in shared batches (group commit), and each returns the offset its
// first record got: every record read back is at the offset its Append
// returned, none lost or moved, in fewer batches than Appends.
func TestShareStateLogGroupCommit(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	l := &shareStateLog{b: b}
	const writers, each = 8, 40
	type placed struct {
		at   int64
		keys []string
	}
	got := make([][]placed, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var recs []share.Record
				var keys []string
				for k := range 1 + i%3 {
					key := fmt.Sprintf("w%d-%d-%d", w, i, k)
					keys = append(keys, key)
					recs = append(recs, share.Record{Key: []byte(key), Value: []byte("v")})
				}
				at, err := l.Append(recs)
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], placed{at, keys})
			}
		})
	}
	wg.Wait()
	byOffset := map[int64]string{}
	require.NoError(t, l.Replay(context.Background(), func(off int64, key, _ []byte) error {
		byOffset[off] = string(key)
		return nil
	}))
	n := 0
	for _, ps := range got {
		for _, p := range ps {
			for k, key := range p.keys {
				require.Equal(t, key, byOffset[p.at+int64(k)], "record of the Append at %d", p.at)
				n++
			}
		}
	}
	require.Len(t, byOffset, n)
	p, err := b.Partition(ShareStateTopic, 0)
	require.NoError(t, err)
	raw, err := p.ReadBatches(0, 1<<30, p.EndOffset())
	require.NoError(t, err)
	batches := 0
	require.NoError(t, batch.Batches(raw, func([]byte, batch.Header) error { batches++; return nil }))
	require.LessOrEqual(t, batches, writers*each)
	t.Logf("%d Appends in %d batches", writers*each, batches)
}
