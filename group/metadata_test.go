package group_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
)

// metaStore is a CommittedOffsetStore that records what it is given.
type metaStore struct {
	mu        sync.Mutex
	plain     []map[group.TopicPartition]int64
	committed []map[group.TopicPartition]group.CommittedOffset
}

func (s *metaStore) Store(_ string, offsets map[group.TopicPartition]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plain = append(s.plain, offsets)
	return nil
}

func (s *metaStore) StoreCommitted(_ string, offsets map[group.TopicPartition]group.CommittedOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, offsets)
	return nil
}

func TestCommitWithMetadata(t *testing.T) {
	store := &metaStore{}
	c := newCoordinator(t, group.Config{Store: store})
	ctx := context.Background()
	tp0, tp1 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}
	require.NoError(t, c.CommitWithMetadata(ctx, "g", "", -1, map[group.TopicPartition]group.CommittedOffset{
		tp0: {Offset: 5, LeaderEpoch: 2, Metadata: "where I was"},
		tp1: {Offset: 7, LeaderEpoch: -1},
	}))
	require.Len(t, store.committed, 1, "a metadata store gets the epochs and metadata")
	require.Empty(t, store.plain)
	want := map[group.TopicPartition]group.CommittedOffset{
		tp0: {Offset: 5, LeaderEpoch: 2, Metadata: "where I was"},
		tp1: {Offset: 7, LeaderEpoch: -1},
	}
	require.Equal(t, want, c.CommittedWithMetadata("g", nil))
	require.Equal(t, map[group.TopicPartition]group.CommittedOffset{tp0: want[tp0]}, c.CommittedWithMetadata("g", []group.TopicPartition{tp0, {Topic: "b"}}))
	require.Equal(t, map[group.TopicPartition]int64{tp0: 5, tp1: 7}, c.Committed("g", nil), "Committed is as it was")

	// Refused: nothing changes, nothing is stored.
	for _, bad := range []group.CommittedOffset{
		{Offset: 1, LeaderEpoch: -2},
		{Offset: 1, LeaderEpoch: -1, Metadata: strings.Repeat("m", group.MaxMetadataLen+1)},
		{Offset: -1, LeaderEpoch: -1},
	} {
		err := c.CommitWithMetadata(ctx, "g", "", -1, map[group.TopicPartition]group.CommittedOffset{tp0: bad})
		require.ErrorIs(t, err, group.ErrInvalidRequest)
	}
	require.Len(t, store.committed, 1)
	require.Equal(t, want, c.CommittedWithMetadata("g", nil))

	// A plain Commit replaces the commit whole: no metadata left.
	require.NoError(t, c.Commit(ctx, "g", "", -1, map[group.TopicPartition]int64{tp0: 6}))
	require.Len(t, store.plain, 1)
	require.Equal(t, group.CommittedOffset{Offset: 6, LeaderEpoch: -1}, c.CommittedWithMetadata("g", nil)[tp0])

	// Delete forgets them; a new commit has no stale metadata.
	require.NoError(t, c.CommitWithMetadata(ctx, "g", "", -1, map[group.TopicPartition]group.CommittedOffset{tp0: {Offset: 8, LeaderEpoch: 1, Metadata: "m"}}))
	require.NoError(t, c.Delete(ctx, "g"))
	require.Empty(t, c.CommittedWithMetadata("g", nil))
	require.NoError(t, c.Commit(ctx, "g", "", -1, map[group.TopicPartition]int64{tp0: 9}))
	require.Equal(t, group.CommittedOffset{Offset: 9, LeaderEpoch: -1}, c.CommittedWithMetadata("g", nil)[tp0])
}

// A plain OffsetStore gets the offsets of CommitWithMetadata; the epochs
// and metadata are kept in memory.
func TestCommitWithMetadataPlainStore(t *testing.T) {
	var got []map[group.TopicPartition]int64
	c := newCoordinator(t, group.Config{Store: storeFunc(func(_ string, o map[group.TopicPartition]int64) error {
		got = append(got, o)
		return nil
	})})
	tp := group.TopicPartition{Topic: "a"}
	require.NoError(t, c.CommitWithMetadata(context.Background(), "g", "", -1, map[group.TopicPartition]group.CommittedOffset{tp: {Offset: 3, LeaderEpoch: 4, Metadata: "x"}}))
	require.Equal(t, []map[group.TopicPartition]int64{{tp: 3}}, got)
	require.Equal(t, group.CommittedOffset{Offset: 3, LeaderEpoch: 4, Metadata: "x"}, c.CommittedWithMetadata("g", nil)[tp])
}

type storeFunc func(string, map[group.TopicPartition]int64) error

func (f storeFunc) Store(g string, o map[group.TopicPartition]int64) error { return f(g, o) }

func TestNewWithCommitted(t *testing.T) {
	tp0, tp1 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}
	c, err := group.NewWithCommitted(group.Config{
		Partitions: partitionsOf(testTopics),
		Initial:    map[string]map[group.TopicPartition]int64{"old": {tp0: 1}},
	}, map[string]map[group.TopicPartition]group.CommittedOffset{
		"g":     {tp0: {Offset: 4, LeaderEpoch: 3, Metadata: "meta"}, tp1: {Offset: -1, LeaderEpoch: -1}},
		"empty": {tp0: {Offset: -1, LeaderEpoch: -1}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	require.Equal(t, map[group.TopicPartition]group.CommittedOffset{tp0: {Offset: 4, LeaderEpoch: 3, Metadata: "meta"}}, c.CommittedWithMetadata("g", nil))
	require.Equal(t, map[group.TopicPartition]int64{tp0: 1}, c.Committed("old", nil))
	_, ok := c.Describe("empty")
	require.False(t, ok, "a group of tombstones only is not kept")
}

func TestCommittedOffsetRecordRoundTrip(t *testing.T) {
	tp := group.TopicPartition{Topic: "orders", Partition: 3}
	at := time.UnixMilli(1700000000000)
	for _, co := range []group.CommittedOffset{
		{Offset: 0, LeaderEpoch: -1},
		{Offset: 42, LeaderEpoch: 7, Metadata: "consumer-1 at 42"},
	} {
		k, v := group.EncodeCommittedOffsetRecord("g", tp, co, at)
		g, gotTP, got, err := group.DecodeCommittedOffsetRecord(k, v)
		require.NoError(t, err)
		require.Equal(t, "g", g)
		require.Equal(t, tp, gotTP)
		require.Equal(t, co, got)
		// It is Kafka's value v3: kmsg reads the same fields.
		var kv kmsg.OffsetCommitValue
		require.NoError(t, kv.ReadFrom(v))
		require.Equal(t, int16(3), kv.Version)
		require.Equal(t, co.Metadata, kv.Metadata)
		require.Equal(t, co.LeaderEpoch, kv.LeaderEpoch)
		require.Equal(t, at.UnixMilli(), kv.CommitTimestamp)
		// The plain decoder reads it too.
		_, _, off, err := group.DecodeOffsetRecord(k, v)
		require.NoError(t, err)
		require.Equal(t, co.Offset, off)
	}
	// Plain records are the metadata ones with none.
	k1, v1 := group.EncodeOffsetRecord("g", tp, 9, at)
	k2, v2 := group.EncodeCommittedOffsetRecord("g", tp, group.CommittedOffset{Offset: 9, LeaderEpoch: -1}, at)
	require.Equal(t, k1, k2)
	require.Equal(t, v1, v2)
	// A v1 value (no leader epoch) decodes to epoch -1, with its metadata.
	old := kmsg.OffsetCommitValue{Version: 1, Offset: 5, Metadata: "old", CommitTimestamp: 1, ExpireTimestamp: 2}
	_, _, got, err := group.DecodeCommittedOffsetRecord(k1, old.AppendTo(nil))
	require.NoError(t, err)
	require.Equal(t, group.CommittedOffset{Offset: 5, LeaderEpoch: -1, Metadata: "old"}, got)
	// A tombstone.
	_, _, got, err = group.DecodeCommittedOffsetRecord(k1, nil)
	require.NoError(t, err)
	require.Equal(t, group.CommittedOffset{Offset: -1, LeaderEpoch: -1}, got)
	// A corrupt epoch.
	bad := kmsg.OffsetCommitValue{Version: 3, Offset: 5, LeaderEpoch: -5}
	_, _, _, err = group.DecodeCommittedOffsetRecord(k1, bad.AppendTo(nil))
	require.ErrorIs(t, err, group.ErrCorruptOffsetRecord)
}

// FuzzDecodeCommittedOffsetRecord: no input panics; what decodes is valid
// and survives an encode and decode unchanged.
func FuzzDecodeCommittedOffsetRecord(f *testing.F) {
	tp := group.TopicPartition{Topic: "orders", Partition: 2}
	key, value := group.EncodeCommittedOffsetRecord("g1", tp, group.CommittedOffset{Offset: 42, LeaderEpoch: 3, Metadata: "m"}, time.UnixMilli(1700000000123))
	f.Add(key, value)
	f.Add(key, []byte(nil))
	f.Add(key, value[:12])
	f.Add(key, (&kmsg.OffsetCommitValue{Version: 1, Offset: 1, Metadata: "old", ExpireTimestamp: 5}).AppendTo(nil))
	f.Add(key, (&kmsg.OffsetCommitValue{Version: 4, Offset: 1, LeaderEpoch: 2, Metadata: "x"}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		g, tp, co, err := group.DecodeCommittedOffsetRecord(key, value)
		if err != nil {
			if !errors.Is(err, group.ErrCorruptOffsetRecord) && !errors.Is(err, group.ErrNotOffsetRecord) {
				t.Fatalf("error %v is neither sentinel", err)
			}
			return
		}
		if co.LeaderEpoch < -1 || co.Offset < -1 || (co.Offset == -1) != (len(value) == 0) {
			t.Fatalf("decoded invalid %+v from a value of %d bytes", co, len(value))
		}
		if co.Offset < 0 {
			return
		}
		k2, v2 := group.EncodeCommittedOffsetRecord(g, tp, co, time.UnixMilli(0))
		g2, tp2, co2, err := group.DecodeCommittedOffsetRecord(k2, v2)
		if err != nil || g2 != g || tp2 != tp || co2 != co {
			t.Fatalf("%q %v %+v re-decodes as %q %v %+v, %v", g, tp, co, g2, tp2, co2, err)
		}
	})
}
