package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/controller"
)

// The active controller's timer moves leadership back to a broker that
// stopped and came back, once the check interval has passed.
func TestPreferredLeadersReturnAfterInterval(t *testing.T) {
	ctx := testContext(t)
	clk := clocktest.New(time.Unix(1_000_000, 0))
	c := newCluster(t, 3, withClock(clk), func(_ int, cfg *controller.Config) {
		cfg.SessionTimeout = 24 * time.Hour // the fake clock fences nobody here
	})
	m := c.nodes[0]
	epochs := liveBrokers(ctx, t, m, 1, 2, 3)
	topic := createTopic(ctx, t, m, "t", controller.TopicSpec{Partitions: 6, ReplicationFactor: 3})
	const back = 1
	var mine []int // the partitions broker 1 is preferred for
	for _, p := range topic.Partitions {
		require.Equal(t, p.Replicas[0], p.Leader)
		if p.Replicas[0] == back {
			mine = append(mine, p.Partition)
		}
	}
	require.NotEmpty(t, mine)

	// Broker 1 goes away (controlled shutdown) and comes back; the leaders
	// add it back to their ISRs.
	for i := 1; ; i++ {
		_, err := m.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: back, BrokerEpoch: epochs[back], WantFence: true})
		if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
			break
		}
	}
	require.False(t, heartbeat(ctx, t, m, back, epochs[back]).Fenced)
	for _, p := range topic.Partitions {
		for i := 1; ; i++ {
			st, _ := c.converge(ctx, c.version())[0].Partition("t", p.Partition) // m's, caught up
			require.NotEqual(t, back, st.Leader)
			if slices.Contains(st.ISR, back) {
				break
			}
			_, err := m.AlterPartition(ctx, controller.AlterPartitionRequest{
				BrokerID: st.Leader, BrokerEpoch: epochs[st.Leader], Topic: "t", Partition: p.Partition,
				LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: append(slices.Clone(st.ISR), back),
			})
			if err != nil && (i == attempts || !errors.Is(err, controller.ErrLeadershipLost)) {
				require.NoError(t, err)
			}
		}
	}
	moved := c.converge(ctx, c.version())[0]

	// Not before the interval: a round trip through the event loop after
	// the clock reached just short of it sees nothing moved.
	clk.Advance(controller.DefaultLeaderImbalanceCheckInterval - time.Second)
	heartbeat(ctx, t, m, 2, epochs[2])
	now := c.converge(ctx, c.version())[0]
	for _, p := range mine {
		st, _ := now.Partition("t", p)
		require.NotEqual(t, back, st.Leader, "partition %d moved before the interval", p)
	}

	// At the interval (again, if the active controller changed meanwhile and
	// its timer started later), leadership returns.
	clk.Advance(time.Second)
	var got *controller.Image
	for step := 0; got == nil; step++ {
		require.Less(t, step, 5, "leadership never returned")
		got = waitFor(ctx, m, moved.Version(), func(img *controller.Image) bool {
			for _, p := range mine {
				if st, _ := img.Partition("t", p); st.Leader != back {
					return false
				}
			}
			return true
		})
		if got == nil {
			clk.Advance(controller.DefaultLeaderImbalanceCheckInterval)
		}
	}
	for _, p := range topic.Partitions {
		before, _ := moved.Partition("t", p.Partition)
		after, _ := got.Partition("t", p.Partition)
		if slices.Contains(mine, p.Partition) {
			require.Equal(t, before.LeaderEpoch+1, after.LeaderEpoch)
			require.Equal(t, before.ISR, after.ISR)
		} else {
			require.Equal(t, before, after, "partition %d, not broker 1's, changed", p.Partition)
		}
	}
}

// waitFor watches m's metadata after version from for up to two seconds
// until cond holds; nil if it did not.
func waitFor(ctx context.Context, m *controller.Controller, from uint64, cond func(*controller.Image) bool) *controller.Image {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	img := m.Image()
	for !cond(img) {
		next, err := m.Wait(ctx, img.Version())
		if err != nil {
			return nil
		}
		img = next
	}
	return img
}

func TestStartRejectsBadImbalancePercentage(t *testing.T) {
	for _, pct := range []int{-1, 101} {
		_, err := controller.Start(controller.Config{NodeID: 1, Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", LeaderImbalancePercentage: pct})
		require.ErrorIs(t, err, controller.ErrInvalidConfig, "percentage %d", pct)
	}
}

// With the check turned off (a negative interval) the active controller
// arms no imbalance timer: only the session (fence) timer runs on the clock.
func TestPreferredLeaderCheckOff(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		timers   int
	}{{-1, 1}, {0, 2}} {
		t.Run(fmt.Sprint(tc.interval), func(t *testing.T) {
			ctx := testContext(t)
			clk := clocktest.New(time.Unix(1_000_000, 0))
			c := newCluster(t, 1, withClock(clk), func(_ int, cfg *controller.Config) {
				cfg.SessionTimeout = 24 * time.Hour
				cfg.LeaderImbalanceCheckInterval = tc.interval
			})
			liveBrokers(ctx, t, c.nodes[0], 1) // answered by the active controller's loop
			require.Equal(t, tc.timers, clk.Pending())
		})
	}
}
