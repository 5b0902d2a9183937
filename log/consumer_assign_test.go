package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
)

// rangeOf is what Kafka's RangeAssignor gives the i-th (by member id) of m
// members of topic "t" of n partitions.
func rangeOf(i, m, n int) []TopicPartition {
	per, extra := n/m, n%m
	start := per*i + min(i, extra)
	if i < extra {
		per++
	}
	out := []TopicPartition{}
	for p := start; p < start+per; p++ {
		out = append(out, TopicPartition{Topic: "t", Partition: p})
	}
	return out
}

// TestConsumerGroupRangeProtocol: two Strata consumers share a group in
// Kafka's classic protocol: the group chooses "range", one of them leads
// and computes the range assignment, both learn theirs from SyncGroup — in
// Kafka's ConsumerProtocol bytes.
func TestConsumerGroupRangeProtocol(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		b := consBroker(t, n)
		var cs []*Consumer
		for i := range 2 {
			cfg := groupCfg("g")
			cfg.ClientID = fmt.Sprintf("c%d", i)
			c := newConsumerT(t, b, cfg)
			cs = append(cs, c)
			startPolling(t, c)
		}
		eventually(t, 30*time.Second, func() bool { return settled(b, "g", n, cs...) }, "two consumers settle")
		d, _ := b.groups.Describe("g")
		require.Equal(t, "consumer", d.ProtocolType)
		require.Equal(t, "range", d.Protocol)
		ids := []string{d.Members[0].ID, d.Members[1].ID}
		require.Contains(t, ids, d.Leader)
		for i, m := range d.Members {
			var a kmsg.ConsumerMemberAssignment
			require.NoError(t, a.ReadFrom(m.MemberAssignment), "Kafka's ConsumerProtocol assignment")
			var meta kmsg.ConsumerMemberMetadata
			require.NoError(t, meta.ReadFrom(m.MemberMetadata), "Kafka's ConsumerProtocol metadata")
			require.Equal(t, []string{"t"}, meta.Topics)
			require.Equal(t, rangeOf(i, 2, n), m.Assignment, "member %s", m.ID) // sorted by id, as range sorts them
		}
		for _, c := range cs {
			member, _, tps, _ := membership(c)
			i := slices.Index(ids, member)
			require.Equal(t, rangeOf(i, 2, n), tps)
		}
	})
}

// TestConsumerGroupWithKafkaMember: a Strata consumer and a member speaking
// Kafka's protocol as a Kafka client does (kgo's default list:
// cooperative-sticky, then range; version 3 metadata; KIP-394) share a
// group; the group chooses range, and whichever leads (the member that was
// there first), the partitions are split by range between them.
func TestConsumerGroupWithKafkaMember(t *testing.T) {
	for _, kafkaLeads := range []bool{true, false} {
		t.Run(fmt.Sprint("kafka leads ", kafkaLeads), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { kafkaMember(t, kafkaLeads) })
		})
	}
}

func kafkaMember(t *testing.T, kafkaLeads bool) {
	const n = 5
	ctx := context.Background()
	b := consBroker(t, n)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = []string{"t"}
	meta.Generation = -1
	req := group.JoinRequest{Group: "g", ClientID: "kgo", ProtocolType: "consumer", RequireKnownMemberID: true,
		Protocols: []group.Protocol{
			{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)},
			{Name: "range", Metadata: meta.AppendTo(nil)},
		}, SessionTimeout: time.Minute}
	resp, err := b.JoinGroup(ctx, req)
	require.ErrorIs(t, err, ErrMemberIDRequired) // KIP-394, as a v4+ client sees it
	req.MemberID = resp.MemberID
	// sync is the Kafka member's SyncGroup, with its own range assignment
	// when it leads; it returns its share.
	sync := func(resp group.JoinResponse) []TopicPartition {
		t.Helper()
		r := group.SyncRequest{Group: "g", MemberID: resp.MemberID, Generation: resp.Generation, ProtocolType: "consumer", Protocol: resp.Protocol}
		if resp.Leader == resp.MemberID {
			subs := map[string][]string{}
			for _, m := range resp.MemberMetadata {
				var mm kmsg.ConsumerMemberMetadata
				require.NoError(t, mm.ReadFrom(m.Metadata))
				subs[m.ID] = mm.Topics
			}
			r.Assignments = map[string][]byte{}
			for id, tps := range assign.Range(subs, map[string]int{"t": n}) {
				r.Assignments[id] = assign.EncodeAssignment(tps)
			}
		}
		got, err := b.SyncGroup(ctx, r)
		require.NoError(t, err)
		var a kmsg.ConsumerMemberAssignment
		require.NoError(t, a.ReadFrom(got.Assignment))
		mine := []TopicPartition{}
		for _, at := range a.Topics {
			for _, p := range at.Partitions {
				mine = append(mine, TopicPartition{Topic: at.Topic, Partition: int(p)})
			}
		}
		return mine
	}

	c := newConsumerT(t, b, groupCfg("g"))
	if kafkaLeads {
		resp, err = b.JoinGroup(ctx, req)
		require.NoError(t, err)
		require.Equal(t, "cooperative-sticky", resp.Protocol, "alone, its first choice")
		require.Equal(t, rangeOf(0, 1, n), sync(resp))
		startPolling(t, c) // joins: a rebalance
		eventually(t, 10*time.Second, func() bool {
			return errors.Is(b.Heartbeat(ctx, "g", req.MemberID, resp.Generation), ErrRebalanceInProgress)
		}, "the Kafka member learns of the rebalance")
	} else {
		startPolling(t, c)
		eventually(t, 10*time.Second, func() bool { return settled(b, "g", n, c) }, "the consumer alone")
	}
	resp, err = b.JoinGroup(ctx, req) // (the consumer's heartbeat learns of the rebalance and rejoins)
	require.NoError(t, err)
	require.Equal(t, "range", resp.Protocol, "the only protocol both speak")
	require.Equal(t, kafkaLeads, resp.Leader == resp.MemberID)
	require.Len(t, resp.MemberMetadata, map[bool]int{true: 2, false: 0}[kafkaLeads])
	mine := sync(resp)

	member, _, _, _ := membership(c)
	first := 0 // the Kafka member's index in member id order
	if member < req.MemberID {
		first = 1
	}
	require.Equal(t, rangeOf(first, 2, n), mine, "the Kafka member's share")
	eventually(t, 10*time.Second, func() bool {
		_, gen, tps, rejoin := membership(c)
		return gen == resp.Generation && !rejoin && slices.Equal(tps, rangeOf(1-first, 2, n))
	}, "the Strata consumer's share")
	require.NoError(t, b.LeaveGroup(ctx, "g", resp.MemberID))
}
