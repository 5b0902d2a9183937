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

// groupStore is a grouptest.Store that also keeps the groups' metadata
// (a group.GroupMetadataStore): the latest value stored for each group,
// nil for a tombstone.
type groupStore struct {
	offsets *grouptest.Store
	mu      sync.Mutex
	groups  map[string][]byte
	fail    error // StoreGroup's answer while set
}

func newGroupStore() *groupStore {
	return &groupStore{offsets: grouptest.NewStore(nil), groups: map[string][]byte{}}
}

func (s *groupStore) Store(g string, offsets map[group.TopicPartition]int64) error {
	return s.offsets.Store(g, offsets)
}

func (s *groupStore) StoreGroup(g string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.groups[g] = append([]byte(nil), value...)
	if value == nil {
		s.groups[g] = nil
	}
	return nil
}

func (s *groupStore) latest(g string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.groups[g]
	return v, ok
}

var _ group.GroupMetadataStore = (*groupStore)(nil)

// A generation is stored once complete; a coordinator started with it has
// the group Stable, with its members, which heartbeat and commit in their
// generation; others are unknown, and a member that never heartbeats
// expires after its session timeout.
func TestGroupMetadataRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newGroupStore()
		c1 := newCoordinator(t, group.Config{Store: store})
		_, _, a, b := twoMembers(t, c1)
		meta, ok := store.latest("g")
		require.True(t, ok)
		require.NotNil(t, meta)
		before, _ := c1.Describe("g")
		require.NoError(t, c1.Close())

		time.Sleep(time.Minute) // the failover takes a while: sessions start anew
		c2 := newCoordinator(t, group.Config{Store: store, InitialGroups: map[string][]byte{"g": meta, "bad": {0, 3, 1}}})
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.Equal(t, group.StateStable, d.State)
		require.Equal(t, before, d)
		require.Equal(t, []string{"g"}, c2.Groups(), "the bad record is ignored")

		require.NoError(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		require.NoError(t, c2.Heartbeat(ctx, "g", b.MemberID, b.Generation))
		tp := group.TopicPartition{Topic: "a", Partition: 0}
		require.NoError(t, c2.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp: 5}))
		require.Equal(t, map[group.TopicPartition]int64{tp: 5}, c2.Committed("g", nil))
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", "stranger", a.Generation), group.ErrUnknownMember)
		require.ErrorIs(t, c2.Commit(ctx, "g", "stranger", a.Generation, map[group.TopicPartition]int64{tp: 6}), group.ErrUnknownMember)
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation-1), group.ErrIllegalGeneration)
		// A follower rejoining with its protocols gets the generation back.
		sync, err := c2.Sync(ctx, group.SyncRequest{Group: "g", MemberID: b.MemberID, Generation: b.Generation})
		require.NoError(t, err)
		require.NotEmpty(t, sync.Assignment)

		// a heartbeats, b never does again: b's session (10 s) expires and
		// the group rebalances.
		for range 3 {
			time.Sleep(4 * time.Second)
			err := c2.Heartbeat(ctx, "g", a.MemberID, a.Generation)
			if errors.Is(err, group.ErrRebalanceInProgress) {
				break
			}
			require.NoError(t, err)
		}
		synctest.Wait()
		d, _ = c2.Describe("g")
		require.Equal(t, group.StatePreparingRebalance, d.State)
		require.Len(t, d.Members, 1)
		require.Equal(t, a.MemberID, d.Members[0].ID)
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrUnknownMember)

		// The last member leaves: the group is empty, its metadata a
		// tombstone.
		require.NoError(t, c2.Leave(ctx, "g", a.MemberID))
		meta, ok = store.latest("g")
		require.True(t, ok)
		require.Nil(t, meta)
	})
}

// A store without StoreGroup keeps working as before; a restored group
// whose members never heartbeat is emptied after their sessions.
func TestGroupMetadataExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newGroupStore()
		c1 := newCoordinator(t, group.Config{Store: store})
		twoMembers(t, c1)
		meta, _ := store.latest("g")
		require.NoError(t, c1.Close())

		c2 := newCoordinator(t, group.Config{Store: store.offsets, InitialGroups: map[string][]byte{"g": meta}})
		d, _ := c2.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		d, ok := c2.Describe("g")
		if ok {
			require.Empty(t, d.Members)
			require.Equal(t, group.StateEmpty, d.State)
		}
	})
}

func TestGroupMetadataKey(t *testing.T) {
	k := group.EncodeGroupMetadataKey("g")
	require.Equal(t, []byte{0, 2, 0, 1, 'g'}, k)
	g, err := group.DecodeGroupMetadataKey(k)
	require.NoError(t, err)
	require.Equal(t, "g", g)
	_, _, _, err = group.DecodeOffsetRecord(k, nil)
	require.ErrorIs(t, err, group.ErrNotOffsetRecord)
	for _, bad := range [][]byte{nil, {0, 1, 0, 1, 'g'}, {0, 2, 0, 2, 'g'}, {0, 2, 0, 0}, {0, 2, 0, 1, 'g', 0}} {
		_, err := group.DecodeGroupMetadataKey(bad)
		require.ErrorIs(t, err, group.ErrCorruptOffsetRecord, "%v", bad)
	}
}

// A static member replaced in a stable group (KIP-345: no rebalance) is
// stored with its new member id, so a coordinator started from the store
// knows the new instance and not the fenced one.
func TestGroupMetadataStaticReplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newGroupStore()
		c1 := newCoordinator(t, group.Config{Store: store, InitialRebalanceDelay: time.Second})
		rs := classic("b-static", proto("range", "S"))
		rs.GroupInstanceID = "host-1"
		chA, chS := joinAsync(ctx, c1, classic("a", proto("range", "A"))), joinAsync(ctx, c1, rs)
		time.Sleep(time.Second)
		a, s := ready(t, chA).resp, ready(t, chS).resp
		_, err := c1.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
			Assignments: map[string][]byte{a.MemberID: []byte("A"), s.MemberID: []byte("S-part")}})
		require.NoError(t, err)
		stable, _ := store.latest("g")

		again, err := c1.Join(ctx, rs) // the restarted instance
		require.NoError(t, err)
		require.Equal(t, s.Generation, again.Generation, "no rebalance")
		meta, ok := store.latest("g")
		require.True(t, ok)
		require.NotEqual(t, stable, meta, "the replacement is stored")
		require.NoError(t, c1.Close())

		c2 := newCoordinator(t, group.Config{Store: store, InitialGroups: map[string][]byte{"g": meta}})
		require.NoError(t, c2.Heartbeat(ctx, "g", again.MemberID, again.Generation))
		require.NoError(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", s.MemberID, s.Generation), group.ErrUnknownMember)
		got, err := c2.Sync(ctx, group.SyncRequest{Group: "g", MemberID: again.MemberID, Generation: again.Generation})
		require.NoError(t, err)
		require.Equal(t, []byte("S-part"), got.Assignment)
	})
}

// A generation whose metadata cannot be stored does not stand (Kafka's
// storeGroup callback): the leader's Sync fails with ErrRebalanceInProgress,
// the group rebalances, and once the store works again the next generation
// is stored and stable.
func TestGroupMetadataStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newGroupStore()
		store.fail = errors.New("disk full")
		c := newCoordinator(t, group.Config{Store: store, InitialRebalanceDelay: time.Second})
		ra, rb := classic("a", proto("range", "A")), classic("b", proto("range", "B"))
		chA, chB := joinAsync(ctx, c, ra), joinAsync(ctx, c, rb)
		time.Sleep(time.Second)
		a, b := ready(t, chA).resp, ready(t, chB).resp
		require.Equal(t, a.MemberID, a.Leader)
		assign := func(a, b group.JoinResponse) map[string][]byte {
			return map[string][]byte{a.MemberID: []byte("A-part"), b.MemberID: []byte("B-part")}
		}
		_, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation, Assignments: assign(a, b)})
		require.ErrorIs(t, err, group.ErrRebalanceInProgress)
		require.ErrorContains(t, err, "disk full")
		_, stored := store.latest("g")
		require.False(t, stored)
		d, _ := c.Describe("g")
		require.Equal(t, group.StatePreparingRebalance, d.State)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrRebalanceInProgress)

		store.mu.Lock()
		store.fail = nil
		store.mu.Unlock()
		ra.MemberID, rb.MemberID = a.MemberID, b.MemberID
		chA, chB = joinAsync(ctx, c, ra), joinAsync(ctx, c, rb)
		a2, b2 := ready(t, chA), ready(t, chB)
		require.NoError(t, a2.err)
		require.NoError(t, b2.err)
		require.Equal(t, a.Generation+1, a2.resp.Generation)
		got, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a2.resp.MemberID, Generation: a2.resp.Generation,
			Assignments: assign(a2.resp, b2.resp)})
		require.NoError(t, err)
		require.Equal(t, []byte("A-part"), got.Assignment)
		meta, stored := store.latest("g")
		require.True(t, stored)
		require.NotNil(t, meta)
		d, _ = c.Describe("g")
		require.Equal(t, group.StateStable, d.State)
	})
}
