package log

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// settled848 reports whether the consumer group is Stable with the
// consumers as its members, each holding what the coordinator assigned
// it, together every one of the n partitions of "t" once.
func settled848(b *Broker, groupID string, n int, cs ...*Consumer) bool {
	d, ok := b.groups.DescribeConsumerGroup(groupID)
	if !ok || d.State != "Stable" || len(d.Members) != len(cs) {
		return false
	}
	seen := map[TopicPartition]bool{}
	for _, c := range cs {
		member, _, tps, rejoin := membership(c)
		if member == "" || rejoin {
			return false
		}
		for _, tp := range tps {
			if seen[tp] {
				return false
			}
			seen[tp] = true
		}
	}
	return len(seen) == n
}

func cfg848(groupID string) ConsumerConfig {
	cfg := groupCfg(groupID)
	cfg.Protocol = GroupProtocolConsumer
	return cfg
}

// TestConsumerProtocolGroup: Consumers of the consumer group protocol
// (KIP-848) on a Broker. A second member takes half the partitions from
// the first, which keeps its member id and the other half throughout (no
// stop of the group); every record is read; a member that closes hands its
// partitions back at once.
func TestConsumerProtocolGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6
		b := consBroker(t, n)
		for p := range n {
			consAppend(t, b, p, 20)
		}
		c1 := newConsumerT(t, b, cfg848("g"))
		l1 := startPolling(t, c1)
		eventually(t, 10*time.Second, func() bool { return settled848(b, "g", n, c1) }, "c1 holds everything")
		id1, epoch1, _, _ := membership(c1)

		c2 := newConsumerT(t, b, cfg848("g"))
		l2 := startPolling(t, c2)
		deadline := time.Now().Add(30 * time.Second)
		for !settled848(b, "g", n, c1, c2) {
			id, _, tps, _ := membership(c1)
			require.Equal(t, id1, id, "c1 stays the same member")
			require.GreaterOrEqual(t, len(tps), n/2, "c1 keeps what it is not asked to give up")
			require.True(t, time.Now().Before(deadline), "c1 and c2 settle")
			time.Sleep(50 * time.Millisecond) // virtual time
		}
		_, epoch, tps1, _ := membership(c1)
		_, _, tps2, _ := membership(c2)
		require.Greater(t, epoch, epoch1)
		require.Len(t, tps1, n/2)
		require.Len(t, tps2, n/2)

		for p := range n {
			consAppend(t, b, p, 5)
		}
		eventually(t, 20*time.Second, func() bool {
			got := map[TopicPartition]map[int64]bool{}
			for _, l := range []*pollLoop{l1, l2} {
				for _, r := range l.records() {
					tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
					if got[tp] == nil {
						got[tp] = map[int64]bool{}
					}
					got[tp][r.Offset] = true
				}
			}
			for p := range n {
				if len(got[TopicPartition{Topic: "t", Partition: p}]) != 25 {
					return false
				}
			}
			return true
		}, "every record read")

		// c2 closes: it left, so c1 gets everything back without a
		// session timeout.
		l2.stop()
		start := time.Now()
		require.NoError(t, c2.Close())
		eventually(t, 10*time.Second, func() bool { return settled848(b, "g", n, c1) }, "c1 holds everything again")
		require.Less(t, time.Since(start), 20*time.Second)
		l1.stop()
		require.NoError(t, c1.Commit(context.Background()))
		require.NoError(t, c1.Close())
		d, ok := b.groups.DescribeConsumerGroup("g")
		require.True(t, ok)
		require.Equal(t, "Empty", d.State)
	})
}

// TestConsumerProtocolNeedsClient: a Client that does not speak the
// consumer group protocol is refused at NewConsumer.
func TestConsumerProtocolNeedsClient(t *testing.T) {
	b := consBroker(t, 1)
	_, err := NewConsumer(struct{ Client }{b}, cfg848("g"))
	require.ErrorIs(t, err, ErrInvalidConfig)
	bad := cfg848("g")
	bad.Protocol = 7
	_, err = NewConsumer(b, bad)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestConsumerProtocolPollTimeout: a consumer-protocol member that stops
// polling for its RebalanceTimeout leaves the group (epoch -1), the other
// takes its partitions, and its next Poll joins again as a new member.
func TestConsumerProtocolPollTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		b := consBroker(t, n)
		c1 := newConsumerT(t, b, cfg848("g"))
		startPolling(t, c1)
		cfg := cfg848("g")
		cfg.RebalanceTimeout = 10 * time.Second
		c2 := newConsumerT(t, b, cfg)
		l2 := startPolling(t, c2)
		eventually(t, 30*time.Second, func() bool { return settled848(b, "g", n, c1, c2) }, "c1 and c2 settle")
		old, _, _, _ := membership(c2)

		l2.stop()
		eventually(t, 30*time.Second, func() bool {
			id, _, _, _ := membership(c2)
			return id == "" && settled848(b, "g", n, c1)
		}, "c2 leaves for not polling, c1 takes everything")

		startPolling(t, c2)
		eventually(t, 30*time.Second, func() bool { return settled848(b, "g", n, c1, c2) }, "c2 back")
		id, _, _, _ := membership(c2)
		require.NotEqual(t, old, id, "a new member")
	})
}
