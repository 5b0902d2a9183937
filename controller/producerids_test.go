package controller

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecideAllocateProducerIDs(t *testing.T) {
	img := build(t, liveBrokerRecords(1, 2)...)
	var got []ProducerIDBlock
	for _, id := range []int{1, 2, 1} {
		recs, blk, err := decideAllocateProducerIDs(img, AllocateProducerIDsRequest{BrokerID: id, BrokerEpoch: int64(id)})
		require.NoError(t, err)
		require.Equal(t, []record{producerIDsRecord{BrokerID: id, BrokerEpoch: int64(id), NextProducerID: blk.Start + ProducerIDBlockSize}}, recs)
		applyAll(t, img, recs)
		got = append(got, blk)
	}
	require.Equal(t, []ProducerIDBlock{{0, 1000}, {1000, 1000}, {2000, 1000}}, got)
	require.EqualValues(t, 3000, img.NextProducerID())

	before := encodeSnapshot(nil, img)
	bad := map[string]struct {
		req  AllocateProducerIDsRequest
		want error
	}{
		"unknown broker": {AllocateProducerIDsRequest{BrokerID: 7, BrokerEpoch: 1}, ErrUnknownBroker},
		"stale epoch":    {AllocateProducerIDsRequest{BrokerID: 2, BrokerEpoch: 1}, ErrStaleBrokerEpoch},
	}
	for name, c := range bad {
		recs, _, err := decideAllocateProducerIDs(img, c.req)
		require.ErrorIs(t, err, c.want, name)
		require.Nil(t, recs, name)
	}
	require.Equal(t, before, encodeSnapshot(nil, img), "a refused request changed the image")

	// The end of the id space.
	img.nextProducerID = math.MaxInt64 - ProducerIDBlockSize + 1
	_, _, err := decideAllocateProducerIDs(img, AllocateProducerIDsRequest{BrokerID: 1, BrokerEpoch: 1})
	require.ErrorIs(t, err, ErrProducerIDsExhausted)
	img.nextProducerID = math.MaxInt64 - ProducerIDBlockSize
	recs, blk, err := decideAllocateProducerIDs(img, AllocateProducerIDsRequest{BrokerID: 1, BrokerEpoch: 1})
	require.NoError(t, err)
	require.Equal(t, ProducerIDBlock{Start: math.MaxInt64 - ProducerIDBlockSize, Len: ProducerIDBlockSize}, blk)
	applyAll(t, img, recs)
	require.EqualValues(t, int64(math.MaxInt64), img.NextProducerID())
}

func TestProducerIDsRecordNeverGoesBack(t *testing.T) {
	img := build(t, producerIDsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: 2000})
	for _, next := range []int64{2000, 1000, 0, -5} {
		require.ErrorIs(t, img.apply(producerIDsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: next}), errInapplicable)
		require.EqualValues(t, 2000, img.NextProducerID())
	}
}

func TestProducerIDsSurviveEntryAndSnapshot(t *testing.T) {
	rec := producerIDsRecord{BrokerID: 3, BrokerEpoch: 9, NextProducerID: 1 << 40}
	got, err := decodeEntry(encodeEntry(nil, []record{rec}))
	require.NoError(t, err)
	require.Equal(t, []record{rec}, got)

	img := build(t, append(liveBrokerRecords(1), rec)...)
	snap, err := decodeSnapshot(encodeSnapshot(nil, img))
	require.NoError(t, err)
	require.EqualValues(t, 1<<40, snap.NextProducerID())
	// A fresh image (no ids given yet) snapshots without the record.
	snap, err = decodeSnapshot(encodeSnapshot(nil, build(t, liveBrokerRecords(1)...)))
	require.NoError(t, err)
	require.Zero(t, snap.NextProducerID())
}
