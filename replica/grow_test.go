package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// voterPeers are the controller voters every member is configured with.
func (c *memberCluster) voterPeers() []replica.Peer {
	if c.voters == 0 {
		return c.peers
	}
	return c.peers[:c.voters]
}

// addBroker starts a new member that is not a voter (a broker only) and
// returns it once it is ready.
func (c *memberCluster) addBroker() *replica.Broker {
	c.t.Helper()
	if c.voters == 0 {
		c.voters = len(c.peers)
	}
	id := len(c.peers) + 1
	raft, err := c.net.Node(node(id)).Reserve()
	require.NoError(c.t, err)
	data := "127.0.0.1:0"
	if c.kafka {
		data, err = c.net.Node(node(id)).Reserve()
		require.NoError(c.t, err)
	}
	c.peers = append(c.peers, replica.Peer{ID: id, Addr: data, RaftAddr: raft})
	c.dirs = append(c.dirs, c.t.TempDir())
	c.members = append(c.members, nil)
	return c.start(id)
}

// Three voters, then a fourth member that is a broker only joins the
// running cluster: it catches up with the metadata, topics created
// afterwards place replicas on it, it leads some of them and serves
// produce and fetch; it cannot be unregistered while it holds replicas,
// and can once it holds none and has stopped.
func TestBrokerJoinsRunningCluster(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testBrokerJoinsRunningCluster(t, tr) })
	}
}

func testBrokerJoinsRunningCluster(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("before", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	produce(t, c.member(1), "before", 0, 20)

	b4 := c.addBroker()
	require.Equal(t, 4, b4.ID())
	require.False(t, b4.Voter())
	for id := 1; id <= 3; id++ {
		require.True(t, c.member(id).Voter())
	}
	c.waitLive(4)
	// Ready means caught up: it knows the topic created before it joined,
	// and a controller.
	_, ok := b4.Image().Topic("before")
	require.True(t, ok)
	ctlID, ok := b4.Controller()
	require.True(t, ok)
	require.NotEqual(t, 4, ctlID, "a broker only is never the active controller")
	require.Equal(t, values(20), consumeAll(t, b4, "before", 20), "a broker serves fetch of partitions it has no replica of")

	// Four partitions of three replicas over four live brokers: Kafka's
	// round-robin gives each broker three replicas and one preferred
	// leadership.
	c.createTopic("after", log.TopicConfig{Partitions: 4, ReplicationFactor: 3, MinInSyncReplicas: 2})
	tinfo, ok := c.member(1).Image().Topic("after")
	require.True(t, ok)
	led := -1
	on4 := 0
	for _, p := range tinfo.Partitions {
		if slices.Contains(p.Replicas, 4) {
			on4++
		}
		if p.Leader == 4 {
			led = p.Partition
		}
	}
	require.Equal(t, 3, on4, "replicas of the new topic on broker 4: %+v", tinfo.Partitions)
	require.GreaterOrEqual(t, led, 0, "broker 4 leads none of %+v", tinfo.Partitions)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod, err := log.NewProducer(b4, log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second, Partitioner: log.PartitionerManual})
	require.NoError(t, err)
	const n = 40
	for i := range n {
		_, err := prod.Send(ctx, log.Record{Topic: "after", Partition: led, Value: []byte(values(n)[i])})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	c.waitInSync("after", led)
	c.checkIdentical("after", led)
	p4, err := b4.Partition("after", led)
	require.NoError(t, err)
	require.Equal(t, int64(n), p4.HighWatermark())
	for _, id := range []int{1, 4} {
		require.Equal(t, values(n), consumeAll(t, c.member(id), "after", n))
	}

	// Decommission: refused while it holds replicas, from any member; over
	// the Kafka protocol, UnregisterBroker answers INVALID_REQUEST, then
	// nothing, then BROKER_ID_NOT_REGISTERED.
	unregister := func(via int) (code int16, err error) {
		if !c.kafka {
			return 0, c.member(via).UnregisterBroker(ctx, 4)
		}
		kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.peers[via-1].Addr}, Dial: c.net.Node("client").Dial})
		require.NoError(t, err)
		defer kc.Close()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 4
		resp, err := kc.Request(ctx, req, 0)
		require.NoError(t, err)
		return resp.(*kmsg.UnregisterBrokerResponse).ErrorCode, nil
	}
	code, err := unregister(2)
	if c.kafka {
		require.Equal(t, int16(42), code)
	} else {
		require.ErrorIs(t, err, controller.ErrBrokerHasReplicas)
	}
	_, ok = c.member(1).Image().Broker(4)
	require.True(t, ok)
	require.NoError(t, c.member(1).DeleteTopic(ctx, "after"))
	c.stop(4)
	code, err = unregister(2)
	require.NoError(t, err)
	require.Zero(t, code)
	for id := 1; id <= 3; id++ {
		c.waitImage(c.member(id), "broker 4 gone", func(img *controller.Image) bool {
			_, ok := img.Broker(4)
			return !ok
		})
	}
	code, err = unregister(3)
	if c.kafka {
		require.Equal(t, int16(102), code)
	} else {
		require.ErrorIs(t, err, controller.ErrUnknownBroker)
	}
	// The cluster goes on with its three voters.
	c.createTopic("later", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	produce(t, c.member(3), "later", 0, 10)
}
