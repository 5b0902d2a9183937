package log

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// encodeBatch encodes n records as a producer does (base offset 0).
func encodeBatch(n int) []byte {
	var bd batch.Builder
	now := time.Now().UnixMilli()
	bd.Reset(now)
	for i := range n {
		r := rec(i)
		bd.Append(now, r.Key, r.Value, nil)
	}
	return append([]byte(nil), bd.Bytes()...)
}

// TestProduceBatchResult: ProduceBatch answers the base offset, -1 for the
// log append time (records keep the producer's timestamps) and the log
// start offset after the append; Produce answers the same base offset.
func TestProduceBatchResult(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{RetentionTime: time.Hour})
	ctx := context.Background()
	tp := TopicPartition{Topic: "t"}

	res, err := b.ProduceBatch(ctx, tp, encodeBatch(3), AcksAll)
	require.NoError(t, err)
	require.Equal(t, ProduceResult{BaseOffset: 0, LogAppendTime: -1, LogStartOffset: 0}, res)
	base, err := b.Produce(ctx, tp, encodeBatch(2), AcksLeader)
	require.NoError(t, err)
	require.EqualValues(t, 3, base)

	// Retention moves the log start offset: the next answer carries it.
	require.NoError(t, p.Roll())
	n, err := p.enforceRetention(time.Now().Add(2 * time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	res, err = b.ProduceBatch(ctx, tp, encodeBatch(1), AcksNone)
	require.NoError(t, err)
	require.Equal(t, ProduceResult{BaseOffset: 5, LogAppendTime: -1, LogStartOffset: 5}, res)
}

// TestProduceBatchRefused: what is refused changes nothing, with an error
// that says why.
func TestProduceBatchRefused(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{MaxMessageBytes: 1000})
	withMinInSync(t, b, "t", 2)
	tp := TopicPartition{Topic: "t"}
	ctx := context.Background()

	_, err := b.ProduceBatch(ctx, TopicPartition{Topic: "nope"}, encodeBatch(1), AcksLeader)
	require.ErrorIs(t, err, ErrUnknownTopic)
	_, err = b.ProduceBatch(ctx, tp, encodeBatch(1), AcksAll)
	require.ErrorIs(t, err, ErrNotEnoughReplicas)
	_, err = b.ProduceBatch(ctx, tp, encodeBatch(100), AcksLeader)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	bad := encodeBatch(1)
	bad[len(bad)-1] ^= 1
	_, err = b.ProduceBatch(ctx, tp, bad, AcksLeader)
	require.ErrorIs(t, err, ErrCorrupt)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.ProduceBatch(cctx, tp, encodeBatch(1), AcksLeader)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, p.EndOffset(), "nothing appended")

	res, err := b.ProduceBatch(ctx, tp, encodeBatch(1), AcksLeader)
	require.NoError(t, err)
	require.Zero(t, res.BaseOffset)
}
