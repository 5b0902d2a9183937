package group_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// The cases of Kafka's GroupCoordinatorTest and GroupMetadataTest for
// transactional offset commits (testBasicFetchTxnOffsets,
// testFetchTxnOffsetsWithAbort, testFetchPendingTxnOffsetsWithAbort,
// testFetchTxnOffsetsIgnoreSpuriousCommit,
// testFetchTxnOffsetsOneProducerMultipleGroups,
// testFetchTxnOffsetsMultipleProducersOneGroup, the member fencing of
// TxnOffsetCommit v3), over a TxnLog, with a restart where it matters.

var (
	ta0 = group.TopicPartition{Topic: "a", Partition: 0}
	ta1 = group.TopicPartition{Topic: "a", Partition: 1}
	tb0 = group.TopicPartition{Topic: "b", Partition: 0}
)

func offs(kv ...any) map[group.TopicPartition]group.CommittedOffset {
	m := map[group.TopicPartition]group.CommittedOffset{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(group.TopicPartition)] = group.CommittedOffset{Offset: int64(kv[i+1].(int)), LeaderEpoch: -1}
	}
	return m
}

func txnReq(g string, pid int64, epoch int16, offsets map[group.TopicPartition]group.CommittedOffset) group.TxnCommitRequest {
	return group.TxnCommitRequest{Group: g, ProducerID: pid, ProducerEpoch: epoch, Generation: -1, Offsets: offsets}
}

func TestTxnCommitPendingUntilMarker(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "abort"}[commit]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := &grouptest.TxnLog{}
			c := openOn(t, l)
			require.NoError(t, c.TxnCommit(ctx, txnReq("g", 1000, 0, offs(ta0, 15, ta1, 7))))
			require.Empty(t, c.CommittedWithMetadata("g", nil), "pending offsets are not visible")
			require.Equal(t, map[group.TopicPartition]bool{ta0: true}, c.PendingTxn("g", []group.TopicPartition{ta0, tb0}))
			require.Equal(t, map[group.TopicPartition]bool{ta0: true, ta1: true}, c.PendingTxn("g", nil))
			require.Empty(t, c.PendingTxn("other", nil))

			require.NoError(t, c.CompleteTxn(ctx, 1000, 0, commit))
			require.Equal(t, 1, l.Markers())
			require.Empty(t, c.PendingTxn("g", nil))
			want := map[group.TopicPartition]group.CommittedOffset{}
			if commit {
				want = offs(ta0, 15, ta1, 7)
			}
			require.Equal(t, want, c.CommittedWithMetadata("g", nil))

			// testFetchTxnOffsetsIgnoreSpuriousCommit: a marker again (a
			// retry, or the other result) changes nothing.
			require.NoError(t, c.CompleteTxn(ctx, 1000, 0, !commit))
			require.Equal(t, want, c.CommittedWithMetadata("g", nil))

			require.NoError(t, c.Close())
			c2 := openOn(t, l)
			require.Equal(t, want, c2.CommittedWithMetadata("g", nil), "after a restart")
			require.Empty(t, c2.PendingTxn("g", nil))
		})
	}
}

// Offsets pending at a restart (or when another coordinator takes the
// partition) come back pending, and the marker then completes them.
func TestTxnPendingSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	l := &grouptest.TxnLog{}
	c1 := openOn(t, l)
	require.NoError(t, c1.CommitWithMetadata(ctx, "g", "", -1, offs(tb0, 3)))
	require.NoError(t, c1.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 10))))
	require.NoError(t, c1.TxnCommit(ctx, txnReq("g", 2, 4, offs(ta1, 20))))
	require.NoError(t, c1.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 11)))) // the later one of a partition wins
	require.NoError(t, c1.Close())

	c2 := openOn(t, l)
	require.Equal(t, offs(tb0, 3), c2.CommittedWithMetadata("g", nil))
	require.Equal(t, map[group.TopicPartition]bool{ta0: true, ta1: true}, c2.PendingTxn("g", nil))
	// The epoch came back with the pending offsets.
	require.ErrorIs(t, c2.TxnCommit(ctx, txnReq("g", 2, 3, offs(ta1, 1))), group.ErrProducerFenced)
	require.NoError(t, c2.CompleteTxn(ctx, 1, 0, true))
	require.NoError(t, c2.CompleteTxn(ctx, 2, 4, false))
	require.Equal(t, offs(tb0, 3, ta0, 11), c2.CommittedWithMetadata("g", nil))
	require.NoError(t, c2.Close())

	c3 := openOn(t, l)
	require.Equal(t, offs(tb0, 3, ta0, 11), c3.CommittedWithMetadata("g", nil))
	require.Empty(t, c3.PendingTxn("g", nil))
}

// testFetchTxnOffsetsOneProducerMultipleGroups and
// testFetchTxnOffsetsMultipleProducersOneGroup.
func TestTxnProducersAndGroups(t *testing.T) {
	ctx := context.Background()
	l := &grouptest.TxnLog{}
	c := openOn(t, l)
	require.NoError(t, c.TxnCommit(ctx, txnReq("g1", 7, 0, offs(ta0, 1))))
	require.NoError(t, c.TxnCommit(ctx, txnReq("g2", 7, 0, offs(ta0, 2))))
	require.NoError(t, c.TxnCommit(ctx, txnReq("g1", 8, 0, offs(ta1, 3))))
	require.NoError(t, c.TxnCommit(ctx, txnReq("g1", 9, 0, offs(tb0, 4))))

	require.NoError(t, c.CompleteTxn(ctx, 8, 0, false))
	require.Empty(t, c.CommittedWithMetadata("g1", nil))
	require.NoError(t, c.CompleteTxn(ctx, 7, 0, true))
	require.Equal(t, offs(ta0, 1), c.CommittedWithMetadata("g1", nil))
	require.Equal(t, offs(ta0, 2), c.CommittedWithMetadata("g2", nil))
	require.Equal(t, map[group.TopicPartition]bool{tb0: true}, c.PendingTxn("g1", nil))
	require.NoError(t, c.CompleteTxn(ctx, 9, 0, true))
	require.Equal(t, offs(ta0, 1, tb0, 4), c.CommittedWithMetadata("g1", nil))
	require.NoError(t, c.Close())
	c2 := openOn(t, l)
	require.Equal(t, offs(ta0, 1, tb0, 4), c2.CommittedWithMetadata("g1", nil))
	require.Equal(t, offs(ta0, 2), c2.CommittedWithMetadata("g2", nil))
}

// A plain commit of a partition stored after a transactional one wins over
// it when the transaction commits; one stored before loses (the later in
// the log stands), live and after a restart alike.
func TestTxnAndPlainCommitOrder(t *testing.T) {
	ctx := context.Background()
	l := &grouptest.TxnLog{}
	c := openOn(t, l)
	require.NoError(t, c.CommitWithMetadata(ctx, "g", "", -1, offs(ta1, 100))) // before
	require.NoError(t, c.TxnCommit(ctx, txnReq("g", 5, 0, offs(ta0, 10, ta1, 11))))
	require.NoError(t, c.CommitWithMetadata(ctx, "g", "", -1, offs(ta0, 50))) // after
	require.Equal(t, map[group.TopicPartition]bool{ta0: true, ta1: true}, c.PendingTxn("g", nil), "still pending")
	require.NoError(t, c.CompleteTxn(ctx, 5, 0, true))
	want := offs(ta0, 50, ta1, 11)
	require.Equal(t, want, c.CommittedWithMetadata("g", nil))
	require.NoError(t, c.Close())
	require.Equal(t, want, openOn(t, l).CommittedWithMetadata("g", nil))
}

// TxnOffsetCommit v3+ (KIP-447) fences zombie members as OffsetCommit
// does; without member fields (older clients) nothing is checked.
func TestTxnCommitMemberFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := openOn(t, &grouptest.TxnLog{})
		_, _, a, b := twoMembers(t, c)
		member := func(id, instance string, gen int32) group.TxnCommitRequest {
			r := txnReq("g", 1, 0, offs(ta0, 1))
			r.MemberID, r.GroupInstanceID, r.Generation = id, instance, gen
			return r
		}
		require.NoError(t, c.TxnCommit(ctx, member(a.MemberID, "", a.Generation)))
		require.ErrorIs(t, c.TxnCommit(ctx, member("nobody", "", a.Generation)), group.ErrUnknownMember)
		require.ErrorIs(t, c.TxnCommit(ctx, member(b.MemberID, "", a.Generation-1)), group.ErrIllegalGeneration)
		require.ErrorIs(t, c.TxnCommit(ctx, member(a.MemberID, "inst", a.Generation)), group.ErrUnknownMember)
		require.NoError(t, c.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 2))), "an older client's, with members")
		require.Equal(t, map[group.TopicPartition]bool{ta0: true}, c.PendingTxn("g", nil))
		require.NoError(t, c.CompleteTxn(ctx, 1, 0, true))
		require.Equal(t, offs(ta0, 2), c.CommittedWithMetadata("g", nil))

		// A static member: its instance id must be held by the member id.
		s, err := c.Join(ctx, group.JoinRequest{Group: "s", ClientID: "c", GroupInstanceID: "inst", Topics: []string{"a"},
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
		require.NoError(t, err)
		r := member(s.MemberID, "inst", s.Generation)
		r.Group = "s"
		require.NoError(t, c.TxnCommit(ctx, r))
		r.MemberID = "zombie"
		require.ErrorIs(t, c.TxnCommit(ctx, r), group.ErrFencedInstanceID)
		// An empty group: a negative generation passes, whatever the member.
		e := member("gone", "", -1)
		e.Group = "empty"
		require.NoError(t, c.TxnCommit(ctx, e))
	})
}

// Fencing by producer epoch, bad requests, and store failures change
// nothing; a marker that failed can be retried.
func TestTxnCommitErrors(t *testing.T) {
	ctx := context.Background()
	l := &grouptest.TxnLog{}
	c := openOn(t, l)
	require.NoError(t, c.TxnCommit(ctx, txnReq("g", 1, 3, offs(ta0, 1))))
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("g", 1, 2, offs(ta0, 9))), group.ErrProducerFenced)
	require.ErrorIs(t, c.CompleteTxn(ctx, 1, 2, true), group.ErrProducerFenced)
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("g", 1, 3, offs(ta0, -1))), group.ErrInvalidRequest)
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("", 1, 3, offs(ta0, 1))), group.ErrInvalidGroup)
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("g", -1, 0, offs(ta0, 1))), group.ErrInvalidRequest)

	// The log fences an older epoch of a producer it knows.
	require.NoError(t, c.TxnCommit(ctx, txnReq("h", 2, 5, offs(ta0, 1))))
	require.NoError(t, c.CompleteTxn(ctx, 2, 5, false))
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("h", 2, 4, offs(ta0, 1))), grouptest.ErrProducerFenced)
	require.Empty(t, c.PendingTxn("h", nil))

	boom := errors.New("disk full")
	l.FailWith(boom)
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("g", 3, 0, offs(ta1, 1))), boom)
	require.Equal(t, map[group.TopicPartition]bool{ta0: true}, c.PendingTxn("g", nil))
	require.ErrorIs(t, c.CompleteTxn(ctx, 1, 3, true), boom)
	require.Empty(t, c.CommittedWithMetadata("g", nil), "a marker not stored completes nothing")
	l.FailWith(nil)
	require.NoError(t, c.CompleteTxn(ctx, 1, 3, true))
	require.Equal(t, offs(ta0, 1), c.CommittedWithMetadata("g", nil))

	require.NoError(t, c.Close())
	require.ErrorIs(t, c.TxnCommit(ctx, txnReq("g", 1, 3, offs(ta0, 1))), group.ErrClosed)
	require.ErrorIs(t, c.CompleteTxn(ctx, 1, 3, true), group.ErrClosed)
}

// A coordinator in memory keeps transactional commits too; one over a
// store that cannot hold them refuses them.
func TestTxnCommitStores(t *testing.T) {
	ctx := context.Background()
	mem := newCoordinator(t, group.Config{})
	require.NoError(t, mem.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 4))))
	require.Empty(t, mem.Committed("g", nil))
	require.NoError(t, mem.CompleteTxn(ctx, 1, 0, true))
	require.Equal(t, map[group.TopicPartition]int64{ta0: 4}, mem.Committed("g", nil))

	plain := newCoordinator(t, group.Config{Store: grouptest.NewStore(nil)})
	require.ErrorIs(t, plain.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 4))), group.ErrTransactionsUnsupported)
	require.NoError(t, plain.CompleteTxn(ctx, 1, 0, true), "nothing can be pending there")

	overPlainLog := openOn(t, &grouptest.Log{})
	require.ErrorIs(t, overPlainLog.TxnCommit(ctx, txnReq("g", 1, 0, offs(ta0, 4))), group.ErrTransactionsUnsupported)
}

// Producers committing and completing transactions while plain commits of
// the same partitions go on, all at once: what the coordinator shows at
// the end is what a replay of its log gives back (the log's order is the
// order the coordinator applied).
func TestTxnConcurrentReplayAgrees(t *testing.T) {
	ctx := context.Background()
	l := &grouptest.TxnLog{}
	c := openOn(t, l)
	groups := []string{"g1", "g2"}
	tps := []group.TopicPartition{ta0, ta1, tb0}
	var wg sync.WaitGroup
	for p := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid := int64(p)
			for i := range 40 {
				g, tp := groups[(p+i)%2], tps[(p*7+i)%3]
				if p%3 == 0 { // a plain committer
					if err := c.CommitWithMetadata(ctx, g, "", -1, offs(tp, p*1000+i)); err != nil {
						t.Error(err)
					}
					continue
				}
				if err := c.TxnCommit(ctx, txnReq(g, pid, int16(i/4), offs(tp, p*1000+i))); err != nil {
					t.Error(err)
				}
				if i%4 == 3 && i != 39 { // the last transaction stays open
					if err := c.CompleteTxn(ctx, pid, int16(i/4), i%8 != 3); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	want := map[string]map[group.TopicPartition]group.CommittedOffset{}
	pend := map[string]map[group.TopicPartition]bool{}
	for _, g := range groups {
		want[g], pend[g] = c.CommittedWithMetadata(g, nil), c.PendingTxn(g, nil)
	}
	require.NotEmpty(t, pend["g1"])
	require.NoError(t, c.Close())
	c2 := openOn(t, l)
	for _, g := range groups {
		require.Equal(t, want[g], c2.CommittedWithMetadata(g, nil), g)
		require.Equal(t, pend[g], c2.PendingTxn(g, nil), g)
	}
}
