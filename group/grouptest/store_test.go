package grouptest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

func TestStore(t *testing.T) {
	clock := grouptest.NewClock(time.UnixMilli(1700000000000))
	s := grouptest.NewStore(clock)
	tp0, tp1 := group.TopicPartition{Topic: "t", Partition: 0}, group.TopicPartition{Topic: "t", Partition: 1}
	require.NoError(t, s.Store("g", map[group.TopicPartition]int64{tp1: 5, tp0: 3}))
	require.NoError(t, s.Store("g", map[group.TopicPartition]int64{tp0: 4}))
	require.NoError(t, s.Store("h", map[group.TopicPartition]int64{tp1: 1}))
	boom := errors.New("boom")
	s.FailWith(boom)
	require.ErrorIs(t, s.Store("g", map[group.TopicPartition]int64{tp0: 100}), boom)
	s.FailWith(nil)
	require.Equal(t, 3, s.Batches())

	recs := s.Records()
	require.Len(t, recs, 4)
	g, tp, off, err := group.DecodeOffsetRecord(recs[0].Key, recs[0].Value)
	require.NoError(t, err)
	require.Equal(t, "g", g)
	require.Equal(t, tp0, tp, "a batch is in partition order")
	require.Equal(t, int64(3), off)
	wantKey, wantValue := group.EncodeOffsetRecord("g", tp0, 3, clock.Now())
	require.Equal(t, grouptest.Record{Key: wantKey, Value: wantValue}, recs[0])

	initial, err := s.Initial()
	require.NoError(t, err)
	require.Equal(t, map[string]map[group.TopicPartition]int64{
		"g": {tp0: 4, tp1: 5},
		"h": {tp1: 1},
	}, initial)
}
