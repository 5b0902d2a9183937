package group_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
)

// The classic protocol through the Coordinator: Join with protocols, the
// leader's Sync, the followers' waiting Syncs.

type synced struct {
	resp group.SyncResponse
	err  error
}

func syncAsync(ctx context.Context, c *group.Coordinator, r group.SyncRequest) <-chan synced {
	ch := make(chan synced, 1)
	go func() {
		resp, err := c.Sync(ctx, r)
		ch <- synced{resp, err}
	}()
	return ch
}

func syncReady(t *testing.T, ch <-chan synced) synced {
	t.Helper()
	synctest.Wait()
	select {
	case s := <-ch:
		return s
	default:
		t.Fatal("Sync still pending")
		return synced{}
	}
}

func syncPending(t *testing.T, ch <-chan synced) {
	t.Helper()
	synctest.Wait()
	select {
	case s := <-ch:
		t.Fatalf("Sync completed: %+v, %v", s.resp, s.err)
	default:
	}
}

// classic is a Join of a member that brings its protocols.
func classic(clientID string, protocols ...group.Protocol) group.JoinRequest {
	return group.JoinRequest{Group: "g", ClientID: clientID, ProtocolType: "consumer", Protocols: protocols,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second}
}

func proto(name, metadata string) group.Protocol {
	return group.Protocol{Name: name, Metadata: []byte(metadata)}
}

// TestSyncLeaderAssigns: two members of mixed assignors form a generation
// with the protocol both support; the leader gets both metadata, the
// follower's Sync waits for the leader's, each gets its bytes.
func TestSyncLeaderAssigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		chA := joinAsync(ctx, c, classic("a", proto("cooperative-sticky", "A-cs"), proto("range", "A-r")))
		chB := joinAsync(ctx, c, classic("b", proto("roundrobin", "B-rr"), proto("range", "B-r")))
		pending(t, chA)
		time.Sleep(time.Second) // the initial rebalance delay, in the bubble's virtual time
		a, b := ready(t, chA), ready(t, chB)
		require.NoError(t, a.err)
		require.NoError(t, b.err)
		if a.resp.Leader != a.resp.MemberID {
			a, b = b, a
		}
		leader, follower := a.resp, b.resp
		require.Equal(t, "range", leader.Protocol)
		require.Equal(t, "consumer", leader.ProtocolType)
		require.Equal(t, leader.Leader, follower.Leader)
		require.Equal(t, leader.Generation, follower.Generation)
		require.Empty(t, follower.MemberMetadata)
		require.Len(t, leader.MemberMetadata, 2)
		for _, m := range leader.MemberMetadata {
			require.Equal(t, map[string]string{a.resp.MemberID: "A-r", b.resp.MemberID: "B-r"}[m.ID], string(m.Metadata))
		}
		d, _ := c.Describe("g")
		require.Equal(t, group.StateCompletingRebalance, d.State)
		require.NoError(t, c.Heartbeat(ctx, "g", follower.MemberID, follower.Generation), "heartbeats while completing")

		chF := syncAsync(ctx, c, group.SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: follower.Generation,
			ProtocolType: "consumer", Protocol: "range"})
		syncPending(t, chF)
		got, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation,
			Assignments: map[string][]byte{leader.MemberID: []byte("L"), follower.MemberID: []byte("F")}})
		require.NoError(t, err)
		require.Equal(t, group.SyncResponse{ProtocolType: "consumer", Protocol: "range", Assignment: []byte("L")}, got)
		f := syncReady(t, chF)
		require.NoError(t, f.err)
		require.Equal(t, []byte("F"), f.resp.Assignment)
		d, _ = c.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		require.Equal(t, leader.MemberID, d.Leader)

		// A stale generation's Sync, and a member of another protocol.
		_, err = c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: follower.MemberID, Generation: follower.Generation - 1})
		require.ErrorIs(t, err, group.ErrIllegalGeneration)
		_, err = c.Join(ctx, classic("c", proto("sticky", "")))
		require.ErrorIs(t, err, group.ErrInconsistentGroupProtocol)
		_, err = c.Join(ctx, group.JoinRequest{Group: "g", ProtocolType: "consumer"})
		require.ErrorIs(t, err, group.ErrInconsistentGroupProtocol)
		d2, _ := c.Describe("g")
		require.Equal(t, d, d2, "refused joins changed the group")
	})
}

// TestSyncLeaderLeaves: the leader leaving while a follower's Sync waits
// fails that Sync with ErrRebalanceInProgress; the follower rejoins and
// leads the next generation.
func TestSyncLeaderLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		ra, rb := classic("a", proto("range", "A")), classic("b", proto("range", "B"))
		chA, chB := joinAsync(ctx, c, ra), joinAsync(ctx, c, rb)
		time.Sleep(time.Second)
		a, b := ready(t, chA).resp, ready(t, chB).resp
		if a.Leader != a.MemberID {
			a, b = b, a
			ra, rb = rb, ra
		}
		chF := syncAsync(ctx, c, group.SyncRequest{Group: "g", MemberID: b.MemberID, Generation: b.Generation})
		syncPending(t, chF)
		require.NoError(t, c.Leave(ctx, "g", a.MemberID))
		require.ErrorIs(t, syncReady(t, chF).err, group.ErrRebalanceInProgress)
		rb.MemberID = b.MemberID
		b2, err := c.Join(ctx, rb)
		require.NoError(t, err)
		require.Equal(t, b.Generation+1, b2.Generation)
		require.Equal(t, b.MemberID, b2.Leader)
		require.Equal(t, []group.MemberMetadata{{ID: b.MemberID, Metadata: []byte(rb.Protocols[0].Metadata)}}, b2.MemberMetadata)
	})
}

// TestSyncCancelled: a withdrawn Sync leaves the member in the group.
func TestSyncCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		chA, chB := joinAsync(ctx, c, classic("a", proto("range", "A"))), joinAsync(ctx, c, classic("b", proto("range", "B")))
		time.Sleep(time.Second)
		a, b := ready(t, chA).resp, ready(t, chB).resp
		if a.Leader != a.MemberID {
			a, b = b, a
		}
		sctx, cancel := context.WithCancel(ctx)
		chF := syncAsync(sctx, c, group.SyncRequest{Group: "g", MemberID: b.MemberID, Generation: b.Generation})
		syncPending(t, chF)
		cancel()
		require.ErrorIs(t, syncReady(t, chF).err, context.Canceled)
		_, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
			Assignments: map[string][]byte{b.MemberID: []byte("B")}})
		require.NoError(t, err)
		got, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: b.MemberID, Generation: b.Generation})
		require.NoError(t, err)
		require.Equal(t, []byte("B"), got.Assignment)
		_, err = c.Sync(ctx, group.SyncRequest{Group: "nope", MemberID: b.MemberID})
		require.ErrorIs(t, err, group.ErrUnknownMember)
	})
}

// TestMemberIDRequired: KIP-394 through the Coordinator.
func TestMemberIDRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		r := classic("client", proto("range", "M"))
		r.RequireKnownMemberID = true
		resp, err := c.Join(ctx, r)
		require.ErrorIs(t, err, group.ErrMemberIDRequired)
		require.Regexp(t, `^client-`, resp.MemberID)
		r.MemberID = resp.MemberID
		joined, err := c.Join(ctx, r)
		require.NoError(t, err)
		require.Equal(t, resp.MemberID, joined.MemberID)
		require.Equal(t, resp.MemberID, joined.Leader)
	})
}

// TestKafkaAndLegacyMembersShareAGroup: a member that brings Kafka's
// ConsumerProtocol bytes (as kgo or sarama speaking "range" would) and one
// that leaves the assignment to Join share a group and split its
// partitions by range, whoever leads.
func TestKafkaAndLegacyMembersShareAGroup(t *testing.T) {
	// The leader is the member whose id sorts first: each kind leads once.
	for _, ids := range [][2]string{{"a-kafka", "b-strata"}, {"b-kafka", "a-strata"}} {
		t.Run(ids[0], func(t *testing.T) { shareAGroup(t, ids[0], ids[1]) })
	}
}

func shareAGroup(t *testing.T, kafkaID, strataID string) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = []string{"b"}
		kafkaReq := classic(kafkaID, proto("cooperative-sticky", "x"), group.Protocol{Name: "range", Metadata: meta.AppendTo(nil)})
		chK := joinAsync(ctx, c, kafkaReq)
		chL := joinAsync(ctx, c, req(strataID, "b"))
		time.Sleep(time.Second)
		k := ready(t, chK)
		require.NoError(t, k.err)
		require.Equal(t, "range", k.resp.Protocol)
		require.Equal(t, kafkaID < strataID, k.resp.Leader == k.resp.MemberID)
		var mine []group.TopicPartition
		if k.resp.Leader == k.resp.MemberID { // the Kafka member computes the range assignment
			subs := map[string][]string{}
			for _, m := range k.resp.MemberMetadata {
				subs[m.ID], _ = assign.DecodeSubscription(m.Metadata)
			}
			as := map[string][]byte{}
			for id, tps := range assign.Range(subs, map[string]int{"b": testTopics["b"]}) {
				as[id] = assign.EncodeAssignment(tps)
			}
			s, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: k.resp.MemberID, Generation: k.resp.Generation, Assignments: as})
			require.NoError(t, err)
			mine, err = assign.DecodeAssignment(s.Assignment)
			require.NoError(t, err)
		} else {
			s, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: k.resp.MemberID, Generation: k.resp.Generation})
			require.NoError(t, err)
			var a kmsg.ConsumerMemberAssignment
			require.NoError(t, a.ReadFrom(s.Assignment), "Kafka's bytes")
			mine, err = assign.DecodeAssignment(s.Assignment)
			require.NoError(t, err)
		}
		l := ready(t, chL)
		require.NoError(t, l.err)
		k.resp.Assignment = mine
		requireGeneration(t, []group.JoinResponse{k.resp, l.resp}, map[string]int{"b": 5})
		d, _ := c.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		for _, m := range d.Members {
			require.Equal(t, []string{"b"}, m.Topics)
			require.NotEmpty(t, m.Assignment)
		}
		require.Equal(t, []group.Listing{{Group: "g", ProtocolType: "consumer", State: group.StateStable, Type: group.TypeClassic}}, c.List())
	})
}

// TestStaticMemberRestart: KIP-345 through the Coordinator. A static
// follower that restarts (a first Join with its instance id) gets the
// generation and its assignment back without a rebalance; the old member id
// is gone, and joining with it is fenced.
func TestStaticMemberRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		rs := classic("b-static", proto("range", "S"))
		rs.GroupInstanceID = "host-1"
		chA, chS := joinAsync(ctx, c, classic("a", proto("range", "A"))), joinAsync(ctx, c, rs)
		time.Sleep(time.Second)
		a, s := ready(t, chA).resp, ready(t, chS).resp
		require.Equal(t, a.MemberID, a.Leader) // "a-…" sorts first
		require.Contains(t, a.MemberMetadata, group.MemberMetadata{ID: s.MemberID, InstanceID: "host-1", Metadata: []byte("S")})
		_, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
			Assignments: map[string][]byte{a.MemberID: []byte("A"), s.MemberID: []byte("S-part")}})
		require.NoError(t, err)

		again, err := c.Join(ctx, rs) // the restarted instance: no member id yet
		require.NoError(t, err)
		require.NotEqual(t, s.MemberID, again.MemberID)
		require.Equal(t, s.Generation, again.Generation, "no rebalance")
		got, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: again.MemberID, Generation: again.Generation})
		require.NoError(t, err)
		require.Equal(t, []byte("S-part"), got.Assignment)
		require.NoError(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), "the others see no rebalance")
		require.ErrorIs(t, c.Heartbeat(ctx, "g", s.MemberID, s.Generation), group.ErrUnknownMember)
		old := rs
		old.MemberID = s.MemberID
		_, err = c.Join(ctx, old)
		require.ErrorIs(t, err, group.ErrFencedInstanceID)
		d, _ := c.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		require.Equal(t, "host-1", d.Members[1].InstanceID)
	})
}
