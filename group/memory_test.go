package group_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
)

// discardLog is an OffsetsLog that keeps nothing: what a group costs the
// coordinator alone.
type discardLog struct{}

func (discardLog) Append([]group.Record) error { return nil }
func (discardLog) Replay(context.Context, func(key, value []byte) error) error {
	return nil
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A member's protocol metadata costs the coordinator one copy: the Join
// keeps it (the caller's bytes are not retained), the leader's answer
// shares it, and the group's metadata record is encoded in one
// allocation. Before: 2x at Join (a second copy for the leader's answer)
// and 2x at the leader's Sync (a copy for the record, which then regrew).
//
//	go test -run TestJoinMemory -v ./group/
func TestJoinMemory(t *testing.T) {
	const size = 256 << 10
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, discardLog{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	for i := range 3 {
		g := fmt.Sprint("g", i)
		md := make([]byte, size)
		before := heapAfterGC()
		a0 := totalAlloc()
		j, err := c.Join(ctx, group.JoinRequest{Group: g, ProtocolType: "consumer",
			Protocols: []group.Protocol{{Name: "range", Metadata: md}}, SessionTimeout: 10 * time.Second})
		require.NoError(t, err)
		a1 := totalAlloc()
		require.Len(t, j.MemberMetadata, 1)
		_, err = c.Sync(ctx, group.SyncRequest{Group: g, MemberID: j.MemberID, Generation: j.Generation,
			Assignments: map[string][]byte{j.MemberID: {0, 1}}})
		require.NoError(t, err)
		a2 := totalAlloc()
		md, j = nil, group.JoinResponse{}
		retained := int64(heapAfterGC()) - int64(before) + size // md was in before
		join, sync := float64(a1-a0)/size, float64(a2-a1)/size
		t.Logf("per JoinGroup of %d KiB metadata: Join allocates %.2fx, the leader's Sync %.2fx, the group keeps %.2fx", size>>10, join, sync, float64(retained)/size)
		require.Less(t, join, 1.3, "Join: the member's one copy")
		require.Less(t, sync, 1.3, "Sync: the group's metadata record")
		require.Less(t, float64(retained)/size, 1.3, "kept: the member's copy")
		runtime.KeepAlive(md)
	}
}

// A Join whose protocols are larger than MaxMemberMetadataBytes is
// refused and keeps nothing; a new member past MaxSize (Kafka's
// group.max.size) gets ErrGroupMaxSizeReached, while the members in the
// group rejoin as before.
func TestJoinBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCoordinator(t, group.Config{MaxMemberMetadataBytes: 100, MaxSize: 2})
		jr := func(member string, md int) group.JoinRequest {
			return group.JoinRequest{Group: "g", MemberID: member, ProtocolType: "consumer",
				Protocols:      []group.Protocol{{Name: "range", Metadata: make([]byte, md)}},
				SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Minute}
		}
		_, err := c.Join(ctx, jr("", 96)) // 5 + 96 bytes
		require.ErrorIs(t, err, group.ErrInvalidRequest)
		require.Empty(t, c.Groups(), "a refused join keeps nothing")

		a, err := c.Join(ctx, jr("", 95))
		require.NoError(t, err)
		// b joins; the group rebalances, a rejoins: two members.
		chB := joinAsync(ctx, c, jr("", 10))
		pending(t, chB)
		a, err = c.Join(ctx, jr(a.MemberID, 95))
		require.NoError(t, err)
		b := ready(t, chB)
		require.NoError(t, b.err)
		require.Equal(t, a.Generation, b.resp.Generation)
		require.Equal(t, 2, a.Members)

		_, err = c.Join(ctx, jr("", 10))
		require.ErrorIs(t, err, group.ErrGroupMaxSizeReached)
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 2, "the refused member was not added")
		require.Equal(t, group.StateCompletingRebalance, d.State, "nor did it start a rebalance")
		// A known member's rejoin passes.
		a2, err := c.Join(ctx, jr(a.MemberID, 95))
		require.NoError(t, err)
		require.Equal(t, a.Generation, a2.Generation)
	})
	for _, cfg := range []group.Config{{MaxSize: -1}, {MaxMemberMetadataBytes: -1}} {
		cfg.Partitions = partitionsOf(testTopics)
		_, err := group.New(cfg)
		require.ErrorIs(t, err, group.ErrInvalidConfig)
	}
}
