package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
)

// voterIDs returns the voters of a DescribeQuorum, sorted.
func voterIDs(t *testing.T, ctx context.Context, m *controller.Controller) (voters, observers []int) {
	t.Helper()
	q, err := m.DescribeQuorum(ctx)
	require.NoError(t, err)
	for _, v := range q.Voters {
		voters = append(voters, v.ID)
		require.GreaterOrEqual(t, v.Applied, int64(0), "voter %d did not answer", v.ID)
	}
	for _, o := range q.Observers {
		observers = append(observers, o.ID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	require.Positive(t, q.HighWatermark)
	require.Positive(t, q.Term)
	return voters, observers
}

// A voter is replaced (KIP-853): a broker that follows the metadata is
// promoted once caught up, the old voter removed; the quorum goes on
// committing with the new voters, refuses the changes Kafka refuses, and
// never removes a voter when the ones left would have no live majority.
func TestReplaceVoter(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	liveBrokers(ctx, t, c.member(1), 1, 2, 3)
	m4 := c.addBroker()
	liveBrokers(ctx, t, m4, 4) // registered: it has joined as a non-voter
	createTopic(ctx, t, c.member(1), "before", controller.TopicSpec{Partitions: 2, ReplicationFactor: 3})

	voters, observers := voterIDs(t, ctx, m4)
	require.Equal(t, []int{1, 2, 3}, voters)
	require.Equal(t, []int{4}, observers)

	require.ErrorIs(t, c.member(2).AddVoter(ctx, 9), controller.ErrInvalidRequest, "a member that does not follow the metadata")
	require.ErrorIs(t, c.member(2).AddVoter(ctx, 1), controller.ErrDuplicateVoter)
	require.ErrorIs(t, c.member(2).RemoveVoter(ctx, 4), controller.ErrVoterNotFound)

	retryLost(t, "add voter", controller.ErrDuplicateVoter, func() error { return c.member(2).AddVoter(ctx, 4) })
	voters, observers = voterIDs(t, ctx, c.member(3))
	require.Equal(t, []int{1, 2, 3, 4}, voters)
	require.Empty(t, observers)

	retryLost(t, "remove voter", controller.ErrVoterNotFound, func() error { return m4.RemoveVoter(ctx, 1) })
	voters, observers = voterIDs(t, ctx, m4)
	require.Equal(t, []int{2, 3, 4}, voters)
	require.Equal(t, []int{1}, observers, "a removed voter follows as an observer")
	c.stop(0)
	createTopic(ctx, t, m4, "after", controller.TopicSpec{Partitions: 1, ReplicationFactor: 2})

	// Voter 3 down: removing 4 would leave 2 and 3, of which one answers.
	c.stop(2)
	require.ErrorIs(t, c.member(2).RemoveVoter(ctx, 4), controller.ErrNoMajorityAfter)
	voters, _ = membersVoters(t, c.member(2))
	require.Equal(t, []int{2, 3, 4}, voters)
	createTopic(ctx, t, m4, "still", controller.TopicSpec{Partitions: 1, ReplicationFactor: 1})
}

func membersVoters(t *testing.T, m *controller.Controller) (voters, observers []int) {
	t.Helper()
	ms, err := m.Members()
	require.NoError(t, err)
	for _, x := range ms {
		if x.Voter {
			voters = append(voters, x.ID)
		} else {
			observers = append(observers, x.ID)
		}
	}
	slices.Sort(voters)
	return voters, observers
}
