package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/stretchr/testify/require"
)

// topicAdmin is the topic administration a cluster member and a Client
// share by name and shape.
type topicAdmin interface {
	CreateTopic(ctx context.Context, name string, cfg log.TopicConfig) error
	DeleteTopic(ctx context.Context, name string) error
	CreatePartitions(ctx context.Context, topic string, count int) error
	TopicConfig(topic string) (log.TopicConfig, error)
	Partitions(ctx context.Context, topic string) (int, error)
}

var (
	_ topicAdmin = (*replica.Broker)(nil)
	_ topicAdmin = (*kafka.Client)(nil)
)

// clusterAdmin is one program's topic admin code against a cluster.
func clusterAdmin(t *testing.T, a topicAdmin, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.CreateTopic(ctx, name, log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2, RetentionTime: time.Hour}))
	require.ErrorIs(t, a.CreateTopic(ctx, name, log.TopicConfig{}), log.ErrTopicExists)
	require.ErrorIs(t, a.CreateTopic(ctx, name+"-rf", log.TopicConfig{ReplicationFactor: 2, MinInSyncReplicas: 3}), log.ErrInvalidConfig)
	cfg, err := a.TopicConfig(name)
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Partitions)
	require.Equal(t, 3, cfg.ReplicationFactor)
	require.Equal(t, 2, cfg.MinInSyncReplicas)
	require.Equal(t, time.Hour, cfg.RetentionTime)
	require.NoError(t, a.CreatePartitions(ctx, name, 4))
	require.ErrorIs(t, a.CreatePartitions(ctx, name, 3), log.ErrInvalidPartitions)
	n, err := a.Partitions(ctx, name)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.NoError(t, a.DeleteTopic(ctx, name))
	require.ErrorIs(t, a.DeleteTopic(ctx, name), log.ErrUnknownTopic)
}

// The same topic admin code against a cluster member and against a
// Client dialed to a member that is not the controller (creations,
// deletions and new partitions go to the controller).
func TestClientAdminCluster(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	var peers []replica.Peer
	for id, raft := range raftAddrs(t, 3) {
		peers = append(peers, replica.Peer{ID: id + 1, Addr: "127.0.0.1:0", RaftAddr: raft})
	}
	members := make([]*replica.Broker, 3)
	for id := 1; id <= 3; id++ {
		b, err := replica.Start(replica.Config{
			ID: id, Dir: fmt.Sprintf("%s/member-%d", dir, id), Addr: "127.0.0.1:0",
			RaftAddr: peers[id-1].RaftAddr, Peers: peers, Raft: controller.LoopbackRaft(),
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		members[id-1] = b
	}
	defer func() {
		for _, b := range members {
			require.NoError(t, b.Close())
		}
	}()

	clusterAdmin(t, members[0], "direct")

	// Dial a member that is not the controller, if the cluster has one.
	via := members[2]
	if ctl, ok := members[0].Controller(); ok {
		for _, b := range members {
			if b.ID() != ctl {
				via = b
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{via.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	clusterAdmin(t, c, "remote")
	// The deletion was committed by the controller; a member lists topics
	// once it has applied it, and the Client may ask any member (it learnt
	// them all from Metadata), so wait for every one.
	for _, m := range members {
		img := m.Image()
		for slices.Contains(img.Topics(), "remote") {
			img, err = m.WaitImage(ctx, img.Version())
			require.NoError(t, err)
		}
	}
	names, err := c.ListTopics(ctx)
	require.NoError(t, err)
	require.NotContains(t, names, "remote")
}
