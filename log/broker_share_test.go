package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
// what is left restores the same state, or after a power loss at least
// that of the snapshot.
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
	// A power loss (topic "t" leaves its state in the page cache) keeps
	// the snapshots the dropped records were made obsolete by.
	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	b = openT(t, fs, "/d")
	require.Equal(t, int64(1100), b.ShareCoordinator().Offsets("g")[t0].StartOffset)
	require.NoError(t, b.Close())
	b = openT(t, crashed, "/d")
	defer b.Close()
	require.GreaterOrEqual(t, b.ShareCoordinator().Offsets("g")[t0].StartOffset, int64(1000), "after a power loss")
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

// shareCrashRecords is how many records of "t" the runs of
// TestShareStateAtEveryCrash hand out, three per acquisition.
const shareCrashRecords = 12

// shareCrashSetup makes the data dir of TestShareStateAtEveryCrash on
// mem: topic "t" (one partition, topic's config) holding
// shareCrashRecords records, durable, and group "g" starting at the
// earliest record.
func shareCrashSetup(t *testing.T, mem *vfs.MemFS, topic TopicConfig) {
	t.Helper()
	b := openT(t, mem, "/d")
	topic.Partitions = 1
	tp, err := b.CreateTopic("t", topic)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, shareCrashRecords, 1)
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	require.NoError(t, b.Close())
}

// shareCrashRun has a member accept every record of "t", three at a
// time, in order: acked counts those whose acceptance was answered.
func shareCrashRun(t *testing.T, fs vfs.FS, defaults TopicConfig, acked *atomic.Int64) {
	t.Helper()
	b, err := Open("/d", Config{FS: fs, DefaultTopic: defaults})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	ctx := context.Background()
	sc := b.ShareCoordinator()
	_, err = sc.Heartbeat(ctx, share.HeartbeatRequest{Group: "g", MemberID: "m1", SubscribedTopics: []string{"t"}})
	require.NoError(t, err)
	t0 := TopicPartition{Topic: "t"}
	for acked.Load() < shareCrashRecords {
		rs, err := sc.Acquire(ctx, "g", "m1", t0, 3)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.Equal(t, acked.Load(), rs[0].First, "acquired in order")
		require.NoError(t, sc.Acknowledge(ctx, "g", "m1", t0, []share.AckBatch{{First: rs[0].First, Last: rs[0].Last, Types: []share.AckType{share.AckAccept}}}))
		acked.Store(rs[0].Last + 1)
	}
}

// shareStateRecords returns the records of ShareStateTopic in b, each
// as its key and value.
func shareStateRecords(t *testing.T, b *Broker) []string {
	t.Helper()
	var out []string
	require.NoError(t, (&shareStateLog{b: b}).Replay(context.Background(), func(_ int64, key, value []byte) error {
		out = append(out, string(key)+"="+string(value))
		return nil
	}))
	return out
}

// TestShareStateAtEveryCrash is the durability rule of ShareStateTopic
// (shareStateConfig): a member accepts the records of a partition, three
// at a time, with a crash before every filesystem change in turn, under
// each flush policy. Reopened, the state is always consistent: the
// records of ShareStateTopic are a prefix of those the run wrote, the
// records accepted are a prefix of those the run accepted and every other
// record is delivered again (none lost). Where acknowledgements are
// durable — a process crash, where the page cache survives, and a power
// loss (with torn unsynced tails every other crash) when the records'
// topic fsyncs every append, or the broker's default does — every
// acknowledged acceptance is kept: no record is accepted twice. With the
// default page-cache policy a power loss loses the latest acceptances
// (their records are delivered again): the writes were not fsynced.
func TestShareStateAtEveryCrash(t *testing.T) {
	s := seed(t)
	cases := []struct {
		name            string
		process         bool // the crash keeps every write (syncedFS)
		durable         bool // every acknowledgement survives
		defaults, topic TopicConfig
	}{
		{name: "process crash, page cache", process: true, durable: true},
		{name: "power loss, topic FlushMessages 1", durable: true, topic: TopicConfig{FlushMessages: 1}},
		{name: "power loss, topic FlushInterval", durable: true, topic: TopicConfig{FlushInterval: time.Hour}},
		{name: "power loss, broker FlushMessages 1", durable: true, defaults: TopicConfig{FlushMessages: 1}},
		{name: "power loss, page cache"},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := func(mem *vfs.MemFS) vfs.FS {
				if tc.process {
					return syncedFS{mem}
				}
				return mem
			}
			counter := &crashAt{mem: vfs.NewMem()}
			shareCrashSetup(t, counter.mem, tc.topic)
			var acked atomic.Int64
			shareCrashRun(t, vfs.WithErrors(base(counter.mem), counter.inject), tc.defaults, &acked)
			total := counter.n
			step, first := 1, 1
			if raceEnabled {
				step, first = 3, 1+int(s%3)
			}
			crashes, lost := 0, 0
			for at := first; at <= total; at += step {
				msg := fmt.Sprintf("%s: crash before change %d of %d", tc.name, at, total)
				var acked atomic.Int64
				ca := &crashAtDurable{crashAt: crashAt{mem: vfs.NewMem(), at: at}, durable: &acked,
					torn: !tc.process && at%2 == 0, rng: rand.New(rand.NewPCG(s, uint64(ci*100000+at)))}
				shareCrashSetup(t, ca.mem, tc.topic)
				shareCrashRun(t, vfs.WithErrors(base(ca.mem), ca.inject), tc.defaults, &acked)
				if ca.image == nil {
					require.Less(t, ca.n, at, msg)
					continue
				}
				crashes++
				b := openT(t, ca.mem, "/d")
				written := shareStateRecords(t, b)
				require.NoError(t, b.Close())

				b = openT(t, ca.image, "/d")
				kept := shareStateRecords(t, b)
				require.LessOrEqual(t, len(kept), len(written), msg)
				require.Equal(t, fmt.Sprint(written[:len(kept)]), fmt.Sprint(kept), "%s: the state left is not a prefix of what was written", msg)
				rs, err := b.ShareCoordinator().Acquire(context.Background(), "g", "m2", TopicPartition{Topic: "t"}, 100)
				require.NoError(t, err, msg)
				accepted := int64(shareCrashRecords)
				if len(rs) > 0 {
					require.Equal(t, []share.AcquiredRange{{First: rs[0].First, Last: shareCrashRecords - 1, DeliveryCount: rs[0].DeliveryCount}}, rs,
						"%s: every record not accepted is delivered again", msg)
					accepted = rs[0].First
				}
				require.Zero(t, accepted%3, "%s: accepted %d records, not whole acknowledgements", msg, accepted)
				if tc.durable {
					require.GreaterOrEqual(t, accepted, ca.durableAt, "%s: an acknowledged acceptance is lost", msg)
				}
				if accepted < ca.durableAt {
					lost++
				}
				require.NoError(t, b.Close(), msg)
			}
			t.Logf("%d crashes of %d changes, %d lost acknowledgements", crashes, total, lost)
			if !tc.durable {
				require.NotZero(t, lost, "no power loss lost an acknowledgement: the state was fsynced")
			}
		})
	}
}
