package replica_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
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

// load is an idempotent acks=all producer sending to one partition until
// stopped, one record at a time: the records it had acknowledged, and the
// errors it met.
type load struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  []string
	errs   []error
	change chan struct{} // closed and replaced at each acknowledgement
}

func startLoad(t testing.TB, client log.Client, topic string, partition int, tag string) *load {
	t.Helper()
	prod, err := log.NewProducer(client, log.ProducerConfig{
		Acks: log.AcksAll, Idempotent: true, Timeout: 20 * time.Second, Partitioner: log.PartitionerManual,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{t: t, cancel: cancel, done: make(chan struct{}), change: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-l.done }) // a test that fails half-way
	go func() {
		defer close(l.done)
		defer prod.Close()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("%s%d", tag, i)
			_, err := prod.Send(ctx, log.Record{Topic: topic, Partition: partition, Value: []byte(v)})
			l.mu.Lock()
			if err == nil {
				l.acked = append(l.acked, v)
				close(l.change)
				l.change = make(chan struct{})
			} else if ctx.Err() == nil {
				l.errs = append(l.errs, err)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// waitAcked waits until n more records than now are acknowledged.
func (l *load) waitAcked(n int) {
	l.t.Helper()
	l.mu.Lock()
	want := len(l.acked) + n
	l.mu.Unlock()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		got, ch, errs := len(l.acked), l.change, slices.Clone(l.errs)
		l.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			l.t.Fatalf("load: %d of %d records acknowledged in 30 s; errors: %v", got, want, errs)
		}
	}
}

// stop ends the load and returns what was acknowledged; it fails the test
// on any error the producer gave up with (it retries the retriable ones).
func (l *load) stop() []string {
	l.t.Helper()
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(l.t, l.errs, "the producer failed sends")
	return l.acked
}

// waitMoved waits until every running member has applied the end of the
// reassignment of topic-p to target.
func (c *memberCluster) waitMoved(topic string, p int, target []int) {
	c.t.Helper()
	for _, b := range c.members {
		if b != nil {
			c.waitImage(b, fmt.Sprintf("%s-%d moved to %v", topic, p, target), func(img *controller.Image) bool {
				st, ok := img.Partition(topic, p)
				return ok && slices.Equal(st.Replicas, target) && len(st.AddingReplicas)+len(st.RemovingReplicas) == 0
			})
		}
	}
}

// consumedHas checks that every acknowledged value is among those read
// from topic-p through b, once each.
func consumedHas(t *testing.T, b *replica.Broker, topic string, p int, acked []string) {
	t.Helper()
	got := valuesOf(t, b, topic, p)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, v := range acked {
		require.Equal(t, 1, seen[v], "acknowledged record %q read %d times", v, seen[v])
	}
}

// A partition moves under load onto a broker that joined the running
// cluster, away from its leader: the new replica catches up as a follower
// and joins the ISR, which completes the move; leadership goes to the
// first target replica; the old leader deletes its replica. No
// acknowledged record is lost and the replicas are identical.
func TestReassignPartitionUnderLoad(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testReassignPartitionUnderLoad(t, tr) })
	}
}

func testReassignPartitionUnderLoad(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("m", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.addBroker()
	c.waitLive(4)
	st, _ := c.any().Image().Partition("m", 0)
	old := st.Leader
	target := append([]int{4}, slices.DeleteFunc(slices.Clone(st.Replicas), func(r int) bool { return r == old })...)
	client := c.any(old, 4)

	l := startLoad(t, client, "m", 0, "r")
	l.waitAcked(30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "m", Partition: 0, Replicas: target}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c.waitMoved("m", 0, target)
	l.waitAcked(30)
	acked := l.stop()

	st, _ = client.Image().Partition("m", 0)
	require.Equal(t, 4, st.Leader, "the removed leader hands over to the first target replica")
	require.Greater(t, st.LeaderEpoch, int32(0))
	moves, err := client.ListPartitionReassignments(nil)
	require.NoError(t, err)
	require.Empty(t, moves)
	_, err = c.member(old).Partition("m", 0)
	require.ErrorIs(t, err, log.ErrUnknownPartition, "the old leader deleted its replica")
	c.waitInSync("m", 0)
	c.checkIdentical("m", 0)
	consumedHas(t, client, "m", 0, acked)
}

// A reassignment survives the failover of the active controller and the
// restart of the member it moves to, and one can be cancelled: the
// partition goes back to its original replicas, and the member that was
// being added deletes what it had.
func TestReassignResumesAndCancels(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("c", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1})
	c.addBroker()
	c.waitLive(4)
	produce(t, c.any(), "c", 0, 10)
	st, _ := c.any().Image().Partition("c", 0)
	orig := slices.Clone(st.Replicas)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// 4 is down: the move onto it waits, recorded.
	c.stop(4)
	target := []int{4, orig[0]}
	res, err := c.any().AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "c", Partition: 0, Replicas: target}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	moves, err := c.any().ListPartitionReassignments([]log.TopicPartition{{Topic: "c", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, moves, 1)
	require.Equal(t, []int{4}, moves[0].AddingReplicas)
	require.Equal(t, target, moves[0].Target())

	// The active controller fails over; the move is still there.
	ctl, ok := c.any().Controller()
	require.True(t, ok)
	c.stop(ctl)
	c.start(ctl)
	for id := 1; id <= 3; id++ {
		moves, err := c.member(id).ListPartitionReassignments(nil)
		require.NoError(t, err)
		require.Len(t, moves, 1, "member %d", id)
	}
	// 4 comes back: it catches up and the move completes.
	c.start(4)
	c.waitMoved("c", 0, target)
	c.waitInSync("c", 0)
	c.checkIdentical("c", 0)
	require.Equal(t, values(10), valuesOf(t, c.member(4), "c", 0))

	// Nothing to cancel now.
	res, err = c.any().AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "c", Partition: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, controller.ErrNoReassignmentInProgress)

	// A move onto x (running) and z (down): x catches up and joins the
	// ISR, z cannot, so the move stays in progress; cancelled, it goes
	// back to the replicas before it, and x deletes its copy.
	x := orig[1]
	z := 6 - orig[0] - orig[1] // the voter that was never a replica
	c.stop(z)
	res, err = c.any(z).AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "c", Partition: 0, Replicas: []int{x, z}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c.waitImage(c.any(z), fmt.Sprintf("%d in the ISR", x), func(img *controller.Image) bool {
		st, _ := img.Partition("c", 0)
		return slices.Contains(st.ISR, x)
	})
	px, err := c.member(x).Partition("c", 0)
	require.NoError(t, err)
	require.Equal(t, int64(10), px.EndOffset(), "in the ISR with every record") // its HW may lag a fetch
	res, err = c.any(z).AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "c", Partition: 0, Replicas: nil}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c.start(z)
	c.waitMoved("c", 0, target)
	_, err = c.member(x).Partition("c", 0)
	require.ErrorIs(t, err, log.ErrUnknownPartition, "the cancelled new replica is deleted")
	_, err = c.member(z).Partition("c", 0)
	require.ErrorIs(t, err, log.ErrUnknownPartition)
	produce(t, c.any(), "c", 10, 5)
	c.waitInSync("c", 0)
	c.checkIdentical("c", 0)
}

// The Kafka protocol's AlterPartitionReassignments and
// ListPartitionReassignments on a member: per-partition errors with
// Kafka's codes, a move that completes, and an empty list after.
func TestReassignOverKafka(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "kafka")
	c.createTopic("k", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1})
	produce(t, c.any(), "k", 0, 10)
	st, _ := c.any().Image().Partition("k", 0)
	other := 6 - st.Replicas[0] - st.Replicas[1]
	target := []int32{int32(other), int32(st.Replicas[0])}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.peers[0].Addr}, Dial: c.net.Node("client").Dial})
	require.NoError(t, err)
	defer kc.Close()
	alter := func(topic string, partition int32, replicas []int32) (int16, []int16) {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = partition, replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := kc.Request(ctx, req, 0)
		require.NoError(t, err)
		r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		var codes []int16
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		return r.ErrorCode, codes
	}
	list := func() []kmsg.ListPartitionReassignmentsResponseTopic {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		resp, err := kc.Request(ctx, req, 0)
		require.NoError(t, err)
		r := resp.(*kmsg.ListPartitionReassignmentsResponse)
		require.Zero(t, r.ErrorCode)
		return r.Topics
	}

	for _, tc := range []struct {
		topic    string
		part     int32
		replicas []int32
		code     int16
	}{
		{"nope", 0, []int32{1}, 3},  // UNKNOWN_TOPIC_OR_PARTITION
		{"k", 5, []int32{1}, 3},     // UNKNOWN_TOPIC_OR_PARTITION
		{"k", 0, []int32{1, 1}, 39}, // INVALID_REPLICA_ASSIGNMENT
		{"k", 0, []int32{1, 9}, 39}, // an unregistered broker
		{"k", 0, []int32{}, 39},     // no replicas
		{"k", 0, nil, 85},           // NO_REASSIGNMENT_IN_PROGRESS
	} {
		top, codes := alter(tc.topic, tc.part, tc.replicas)
		require.Zero(t, top)
		require.Equal(t, []int16{tc.code}, codes, "%s-%d %v", tc.topic, tc.part, tc.replicas)
	}
	require.Empty(t, list())

	top, codes := alter("k", 0, target)
	require.Zero(t, top)
	require.Equal(t, []int16{0}, codes)
	want := []int{int(target[0]), int(target[1])}
	c.waitMoved("k", 0, want)
	require.Empty(t, list())
	c.waitInSync("k", 0)
	c.checkIdentical("k", 0)
	require.Equal(t, values(10), valuesOf(t, c.member(other), "k", 0))
}
