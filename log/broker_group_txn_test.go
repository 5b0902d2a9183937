package log

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// TestGroupTxnOffsets: a producer's transactional commits go to
// __consumer_offsets as transactional batches of the producer (each
// appended, none taken for a duplicate), hold the partition's last stable
// offset back and stay invisible until completeGroupTxn writes the
// marker; a committed transaction's offsets survive a crash, and offsets
// pending at a crash come back pending, then abort.
func TestGroupTxnOffsets(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	tp0, tp1 := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	commit := func(pid int64, epoch int16, tp TopicPartition, off int64) error {
		return b.TxnCommitOffsets(ctx, group.TxnCommitRequest{Group: "g", ProducerID: pid, ProducerEpoch: epoch, Generation: -1,
			Offsets: map[TopicPartition]group.CommittedOffset{tp: {Offset: off, LeaderEpoch: -1}}})
	}
	fetch := func() map[TopicPartition]int64 {
		got, err := b.FetchOffsets(ctx, "g", []TopicPartition{tp0, tp1})
		require.NoError(t, err)
		return got
	}
	require.NoError(t, commit(10, 0, tp0, 5))
	require.NoError(t, commit(10, 0, tp0, 6)) // same producer and epoch: the next sequence
	p, err := b.offsetsPartition()
	require.NoError(t, err)
	require.Equal(t, int64(2), p.EndOffset(), "two batches appended")
	require.Equal(t, int64(0), p.LastStableOffset(), "an open transaction holds the LSO")
	require.Empty(t, fetch())

	require.NoError(t, b.completeGroupTxn(ctx, 10, 0, true))
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, fetch())
	require.Equal(t, p.EndOffset(), p.LastStableOffset())

	// The next transaction of the producer, at a bumped epoch (KIP-890):
	// sequence 0 again; an older epoch is fenced by the partition.
	require.NoError(t, commit(10, 1, tp1, 9))
	require.ErrorIs(t, commit(10, 0, tp1, 1), ErrProducerFenced)
	require.ErrorIs(t, b.completeGroupTxn(ctx, 10, 0, false), ErrProducerFenced)
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, fetch())

	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	b = openT(t, crashed, "/d")
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, fetch())
	require.Equal(t, map[TopicPartition]bool{tp1: true}, b.GroupCoordinator().PendingTxn("g", nil), "pending after the crash")
	require.NoError(t, b.completeGroupTxn(ctx, 10, 1, false))
	require.Empty(t, b.GroupCoordinator().PendingTxn("g", nil))
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, fetch(), "aborted")
	p, err = b.offsetsPartition()
	require.NoError(t, err)
	require.Equal(t, p.EndOffset(), p.LastStableOffset())

	// The markers are in the log as Kafka's control batches.
	var markers []batch.Marker
	raw, err := p.ReadBatches(0, 1<<20, p.EndOffset())
	require.NoError(t, err)
	require.NoError(t, batch.Batches(raw, func(bt []byte, h batch.Header) error {
		if h.Control() {
			m, _, err := batch.ParseMarker(bt)
			require.NoError(t, err)
			m.Timestamp = 0
			markers = append(markers, m)
		} else {
			require.True(t, h.Transactional())
			require.Equal(t, int64(10), h.ProducerID)
		}
		return nil
	}))
	require.Equal(t, []batch.Marker{{Commit: true, ProducerID: 10}, {ProducerID: 10, ProducerEpoch: 1}}, markers)
	require.NoError(t, b.Close())

	b = openT(t, fs, "/d") // the clean close, also with the abort missing
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, fetch())
	require.Equal(t, map[TopicPartition]bool{tp1: true}, b.GroupCoordinator().PendingTxn("g", nil))
	require.NoError(t, b.Close())
}
