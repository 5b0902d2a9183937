package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

func ready(b *replica.Broker) bool {
	select {
	case <-b.Ready():
		return true
	default:
		return false
	}
}

// A member restarted while the others run returns from Start knowing the
// topics created while it was down: as a log.Client and on its Kafka
// listener, at once.
func TestStartReturnsCaughtUp(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local") // Kafka listeners on loopback TCP
	c.createTopic("early", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.stop(3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"late-1", "late-2"} {
		require.NoError(t, c.member(1).CreateTopic(ctx, name, log.TopicConfig{Partitions: 3, ReplicationFactor: 2}))
	}
	b := c.start(3)
	require.True(t, ready(b), "Start returned before the member was ready")
	require.Equal(t, []string{"early", "late-1", "late-2"}, b.Topics())
	for _, name := range []string{"late-1", "late-2"} {
		n, err := b.Partitions(context.Background(), name)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	}
	_, err := b.Partition("early", 1) // its replica, opened
	require.NoError(t, err)

	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{b.Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	n, err := kc.Partitions(context.Background(), "late-2")
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// The members of a cluster that is forming, started one by one in one
// process: the first returns from Start at once without a quorum, and its
// listener answers only once it is ready; CreateTopic waits for the
// members a replication factor needs, and says how many there are when its
// context ends first; once it returns, a member other than the one asked
// takes records at once.
func TestFormingClusterOneByOne(t *testing.T) {
	leaktest.Check(t)
	c := newMemberCluster(t, 3, "local")
	b1 := c.start(1)
	require.False(t, ready(b1), "the first member of three is ready alone")

	// A client of the first member: its Metadata is answered only once
	// the member is ready, never with the member's view before it is.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dialed := make(chan bool, 1)
	go func() {
		kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{b1.Addr()}})
		if err == nil {
			kc.Close()
		}
		dialed <- err == nil && ready(b1)
	}()

	b2 := c.start(2)
	require.True(t, ready(b2), "the second member, with the first reachable, returned before it was ready")

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err := b1.CreateTopic(short, "t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	cancelShort()
	require.ErrorIs(t, err, log.ErrInvalidReplicationFactor)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "2 of the 3 voters registered")
	require.Empty(t, b1.Topics(), "a create that failed changed something")

	created := make(chan error, 1)
	go func() {
		created <- b1.CreateTopic(ctx, "t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	}()
	b3 := c.start(3)
	require.NoError(t, <-created)
	require.True(t, <-dialed, "the first member's listener answered before the member was ready")

	// Every member knows the topic: a produce through the third, at once.
	for _, b := range []*replica.Broker{b1, b2, b3} {
		n, err := b.Partitions(context.Background(), "t")
		require.NoError(t, err, "member %d", b.ID())
		require.Equal(t, 2, n)
	}
	_, err = b3.Produce(ctx, log.TopicPartition{Topic: "t", Partition: 1}, oneBatch(t, "v"), log.AcksAll)
	require.NoError(t, err)

	// A factor no set of voters could satisfy fails at once.
	err = b1.CreateTopic(ctx, "u", log.TopicConfig{Partitions: 1, ReplicationFactor: 4})
	require.ErrorIs(t, err, log.ErrInvalidReplicationFactor)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}
