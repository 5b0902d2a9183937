package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
)

func consumer848(t *testing.T, cl log.Client, topics ...string) *log.Consumer {
	t.Helper()
	c, err := log.NewConsumer(cl, log.ConsumerConfig{
		Group: "g", Topics: topics, Reset: log.ResetEarliest, Protocol: log.GroupProtocolConsumer,
		MaxWait: 20 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	return c
}

// settledOver848 reports whether the consumer group g is Stable at b's
// coordinator with the consumers as its members, each holding what it was
// assigned, together the n partitions once.
func settledOver848(b *log.Broker, n int, cs ...*log.Consumer) bool {
	d, ok := b.GroupCoordinator().DescribeConsumerGroup("g")
	if !ok || d.State != "Stable" || len(d.Members) != len(cs) {
		return false
	}
	seen := map[log.TopicPartition]bool{}
	for _, c := range cs {
		for _, tp := range c.Assignment() {
			if seen[tp] {
				return false
			}
			seen[tp] = true
		}
	}
	return len(seen) == n
}

// TestClientConsumerProtocolGroup: log.Consumers of the consumer group
// protocol (KIP-848) over a kafka.Client, against a Strata server: the
// first takes every partition, a second takes half of them while the first
// stays the same member with the other half, every record is read, the
// commits carry the member epoch and land, and a consumer that closes
// hands its partitions back at once (no session timeout).
func TestClientConsumerProtocolGroup(t *testing.T) {
	leaktest.Check(t)
	const parts = 4
	s, b, _ := start(t, Config{}, logtest.Topic("t", parts))
	appendValues(t, b, parts, 10, "a")
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()

	c1 := consumer848(t, cl, "t")
	p1 := startPolling(t, c1)
	require.Eventually(t, func() bool { return settledOver848(b, parts, c1) }, 20*time.Second, 5*time.Millisecond, "c1 holds everything")
	d, _ := b.GroupCoordinator().DescribeConsumerGroup("g")
	first := d.Members[0].MemberID
	require.Len(t, first, 22, "the client made the member id: base64 of 16 bytes")

	c2 := consumer848(t, cl, "t")
	p2 := startPolling(t, c2)
	require.Eventually(t, func() bool {
		return settledOver848(b, parts, c1, c2) && len(c1.Assignment()) == parts/2
	}, 20*time.Second, 5*time.Millisecond, "c2 takes half")
	d, _ = b.GroupCoordinator().DescribeConsumerGroup("g")
	require.Contains(t, []string{d.Members[0].MemberID, d.Members[1].MemberID}, first, "c1 stayed the same member")

	appendValues(t, b, parts, 5, "b")
	byValue := func() map[string]int {
		out := map[string]int{}
		for _, p := range []*polling{p1, p2} {
			recs, err := p.read()
			require.NoError(t, err)
			for _, r := range recs {
				out[string(r.Value)]++
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(byValue()) == parts*15 }, 20*time.Second, 5*time.Millisecond, "every record read")

	// c2 leaves: c1 gets everything back at once.
	p2.stop()
	require.NoError(t, c2.Commit(ctx))
	require.NoError(t, c2.Close())
	require.Eventually(t, func() bool { return settledOver848(b, parts, c1) }, 20*time.Second, 5*time.Millisecond, "c1 holds everything again")
	p1.stop()
	require.NoError(t, c1.Commit(ctx))
	require.NoError(t, c1.Close())
	d, ok := b.GroupCoordinator().DescribeConsumerGroup("g")
	require.True(t, ok)
	require.Equal(t, "Empty", d.State)
	committed, err := cl.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, committed, parts)
	for tp, off := range committed {
		require.Equal(t, int64(15), off, "%v", tp)
	}
}

// TestClientConsumerHeartbeat checks the Client's ConsumerHeartbeat alone:
// topics by id both ways (one created after the Client learned the ids),
// what a member owns reaching the coordinator (a partition moves only once
// its owner reports it given up), the coordinator's errors as group's
// sentinels, leaving.
func TestClientConsumerHeartbeat(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("t", 2))
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}, ClientID: "billing"})
	require.NoError(t, err)
	defer cl.Close()

	j, err := cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", RebalanceTimeout: time.Minute, SubscribedTopics: []string{"t"}, Owned: []log.TopicPartition{},
	})
	require.NoError(t, err)
	require.NotEmpty(t, j.MemberID)
	require.Equal(t, int32(1), j.MemberEpoch)
	require.Positive(t, j.HeartbeatInterval)
	all := []log.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	require.Equal(t, all, j.Assignment)

	// A topic created now: its id is not known to the Client yet.
	_, err = b.CreateTopic("u", log.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	h, err := cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", MemberID: j.MemberID, MemberEpoch: j.MemberEpoch, RebalanceTimeout: -1,
		SubscribedTopics: []string{"t", "u"}, Owned: all,
	})
	require.NoError(t, err)
	require.Equal(t, append(all, log.TopicPartition{Topic: "u", Partition: 0}), h.Assignment)
	d, ok := b.GroupCoordinator().DescribeConsumerGroup("g")
	require.True(t, ok)
	require.Equal(t, h.Assignment, d.Members[0].Assignment)
	require.Equal(t, "billing", d.Members[0].ClientID, "the request header's client id names the member")

	// Revoke before assign: a second member gets what the first still
	// reports it owns (sent by topic id) only once it reports it gone.
	m2, err := cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", RebalanceTimeout: time.Minute, SubscribedTopics: []string{"t", "u"}, Owned: []log.TopicPartition{},
	})
	require.NoError(t, err)
	h, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", MemberID: j.MemberID, MemberEpoch: h.MemberEpoch, RebalanceTimeout: -1, Owned: h.Assignment,
	})
	require.NoError(t, err)
	kept := h.Assignment
	require.NotEmpty(t, kept)
	require.Less(t, len(kept), 3, "the first gives some up")
	m2, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", MemberID: m2.MemberID, MemberEpoch: m2.MemberEpoch, RebalanceTimeout: -1, Owned: m2.Assignment,
	})
	require.NoError(t, err)
	require.Empty(t, m2.Assignment, "still owned by the first")
	h, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", MemberID: j.MemberID, MemberEpoch: h.MemberEpoch, RebalanceTimeout: -1, Owned: kept,
	})
	require.NoError(t, err)
	m2, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: "g", MemberID: m2.MemberID, MemberEpoch: m2.MemberEpoch, RebalanceTimeout: -1, Owned: []log.TopicPartition{},
	})
	require.NoError(t, err)
	require.Len(t, m2.Assignment, 3-len(kept), "released: the second's now")
	require.NotContains(t, m2.Assignment, kept[0])

	_, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: j.MemberID, MemberEpoch: h.MemberEpoch + 5, RebalanceTimeout: -1})
	require.ErrorIs(t, err, log.ErrFencedMemberEpoch)
	_, err = cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: "nobody", MemberEpoch: 3, RebalanceTimeout: -1})
	require.ErrorIs(t, err, log.ErrUnknownMember)

	l, err := cl.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: j.MemberID, MemberEpoch: -1, RebalanceTimeout: -1})
	require.NoError(t, err)
	require.Equal(t, int32(-1), l.MemberEpoch)
	d, _ = b.GroupCoordinator().DescribeConsumerGroup("g")
	require.Len(t, d.Members, 1, "the second stays")
}
