package kafka

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
)

// failoverCluster is two servers, nodes 1 and 2, each over a broker of its
// own with topic "t" (one partition), which say that the partition's
// leader and every group's coordinator is node leader. A node that is not
// the leader answers produces and fetches NOT_LEADER_OR_FOLLOWER.
type failoverCluster struct {
	leader  atomic.Int32
	brokers [3]*log.Broker // by node id
	servers [3]*Server
	coords  [3]*group.Coordinator

	refuse atomic.Bool   // every node answers NOT_LEADER_OR_FOLLOWER, the leader too
	hung   atomic.Int32  // a node whose fetches never answer (a stopped process), 0: none
	stop   chan struct{} // closed at the end: hung fetches return

	mu    sync.Mutex
	nodes []ClusterBroker
	// onState, if set, is called on each PartitionState (a Metadata
	// answer) with the node answering.
	onState func(node int32)
}

// failoverNode is one node's Backend.
type failoverNode struct {
	*log.Broker
	id int32
	c  *failoverCluster
}

func (n failoverNode) notLeader() error {
	if l := n.c.leader.Load(); l != n.id || n.c.refuse.Load() {
		return log.ErrNotLeader
	}
	return nil
}

func (n failoverNode) Produce(ctx context.Context, tp log.TopicPartition, b []byte, acks log.Acks) (int64, error) {
	if err := n.notLeader(); err != nil {
		return 0, err
	}
	return n.Broker.Produce(ctx, tp, b, acks)
}

func (n failoverNode) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	if n.c.hung.Load() == n.id {
		select {
		case <-ctx.Done():
		case <-n.c.stop:
		}
		return log.FetchResponse{}, ctx.Err()
	}
	if err := n.notLeader(); err != nil {
		resp := log.FetchResponse{Partitions: make([]log.FetchedPartition, len(req.Partitions))}
		for i, fp := range req.Partitions {
			resp.Partitions[i] = log.FetchedPartition{TopicPartition: fp.TopicPartition, Err: err}
		}
		return resp, nil
	}
	return n.Broker.Fetch(ctx, req)
}

func (n failoverNode) ClusterBrokers() []ClusterBroker {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return append([]ClusterBroker(nil), n.c.nodes...)
}

func (failoverNode) ControllerID() int32 { return 1 }

func (n failoverNode) PartitionState(string, int) (int32, int32, []int32, []int32, bool) {
	n.c.mu.Lock()
	on := n.c.onState
	n.c.mu.Unlock()
	if on != nil {
		on(n.id)
	}
	l := n.c.leader.Load()
	return l, l, []int32{1, 2}, []int32{1, 2}, true
}

func (n failoverNode) GroupCoordinator() *group.Coordinator { return nil }

func (n failoverNode) CoordinatorFor(context.Context, string) (*group.Coordinator, int32, bool) {
	l := n.c.leader.Load()
	if l == n.id {
		return n.c.coords[n.id], l, true
	}
	return nil, l, true
}

func (n failoverNode) Coordinators() []*group.Coordinator { return nil }

func startFailover(t *testing.T) *failoverCluster {
	t.Helper()
	c := &failoverCluster{stop: make(chan struct{})}
	c.leader.Store(1)
	for id := int32(1); id <= 2; id++ {
		b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
		c.brokers[id] = b
		c.coords[id] = newCoordinator(t, b)
		s, err := Listen("127.0.0.1:0", failoverNode{Broker: b, id: id, c: c}, Config{NodeID: id})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		c.servers[id] = s
		host, port, err := net.SplitHostPort(s.Addr())
		require.NoError(t, err)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		c.nodes = append(c.nodes, ClusterBroker{ID: id, Host: host, Port: int32(p)})
	}
	t.Cleanup(func() { close(c.stop) }) // first: a hung fetch returns before its server closes
	return c
}

// kill stops node id's server: its connections break, and dialing it is
// refused.
func (c *failoverCluster) kill(t *testing.T, id int32) {
	t.Helper()
	require.NoError(t, c.servers[id].Close())
}

// afterMetadata makes node 2 the leader once node 2 has answered n
// Metadata requests more: the client retried that often meanwhile.
func (c *failoverCluster) afterMetadata(n int32) <-chan struct{} {
	var seen atomic.Int32
	done := make(chan struct{})
	c.mu.Lock()
	c.onState = func(node int32) {
		if node == 2 && seen.Add(1) == n {
			c.leader.Store(2)
			close(done)
		}
	}
	c.mu.Unlock()
	return done
}

func oneRecord(t *testing.T, v string, pid int64) []byte {
	t.Helper()
	var bd batch.Builder
	bd.Reset(time.Now().UnixMilli())
	bd.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
	b := bd.Bytes()
	if pid >= 0 {
		batch.SetProducer(b, pid, 0, 0)
	}
	return append([]byte(nil), b...)
}

// The leader's server stops; the client keeps its produce, refreshes the
// metadata (still naming the dead node for a few rounds, as a cluster does
// until it fences a broker), backs off, and sends it to the new leader
// once the metadata names it. ListOffset and Fetch follow too.
func TestClientFollowsLeaderAfterKill(t *testing.T) {
	leaktest.Check(t)
	c := startFailover(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{c.servers[1].Addr(), c.servers[2].Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	tp := log.TopicPartition{Topic: "t"}
	off, err := kc.Produce(ctx, tp, oneRecord(t, "before", -1), log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 0, off)

	moved := c.afterMetadata(3)
	c.kill(t, 1)
	// An idempotent batch: it may be sent again on a broken connection.
	off, err = kc.Produce(ctx, tp, oneRecord(t, "after", 7), log.AcksAll)
	require.NoError(t, err, "the produce rode through the leader's death")
	<-moved
	require.EqualValues(t, 0, off, "written at the new leader")
	end, err := c.brokers[2].ListOffset(context.Background(), tp, log.LatestOffset)
	require.NoError(t, err)
	require.EqualValues(t, 1, end)

	// A batch without a producer id, now that the dead broker's
	// connection is known broken: sent again only when it surely was not
	// written, and here it is written once.
	off, err = kc.Produce(ctx, tp, oneRecord(t, "plain", -1), log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 1, off)

	got, err := kc.ListOffset(context.Background(), tp, log.LatestOffset)
	require.NoError(t, err)
	require.EqualValues(t, 2, got)
	resp, err := kc.Fetch(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp}}, MaxWait: time.Millisecond})
	require.NoError(t, err)
	defer resp.Release()
	require.NoError(t, resp.Partitions[0].Err)
	raw, err := resp.Partitions[0].Records.Bytes()
	require.NoError(t, err)
	recs, err := log.DecodeRecords(raw)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, "after", string(recs[0].Value))
}

// A consumer over kafka.Dial polls through the leader's death: its Polls
// come back empty (no error) while no leader can be read, then it reads
// the new leader from its position. Commit reaches the coordinator's
// successor.
func TestConsumerOverDialRidesThroughLeaderKill(t *testing.T) {
	leaktest.Check(t)
	c := startFailover(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{c.servers[1].Addr(), c.servers[2].Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	tp := log.TopicPartition{Topic: "t"}
	_, err = c.brokers[1].Produce(ctx, tp, oneRecord(t, "a", -1), log.AcksAll)
	require.NoError(t, err)
	for _, v := range []string{"x", "b"} { // the successor's log: "b" at offset 1
		_, err = c.brokers[2].Produce(ctx, tp, oneRecord(t, v, -1), log.AcksAll)
		require.NoError(t, err)
	}
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	recs, err := cons.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "a", string(recs[0].Value))

	moved := c.afterMetadata(5)
	c.kill(t, 1)
	var got []log.Record
	for len(got) == 0 {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err, "Poll rides through the leader's death")
		got = append(got, recs...)
	}
	<-moved
	require.Equal(t, "b", string(got[0].Value))
	require.EqualValues(t, 1, got[0].Offset)

	require.NoError(t, kc.CommitOffsets(ctx, "g", "", -1, map[log.TopicPartition]int64{tp: 2}))
	require.Equal(t, map[log.TopicPartition]int64{tp: 2}, c.coords[2].Committed("g", nil), "committed at the successor")
}

// A produce, a fetch and a Poll whose context ends while the leader
// cannot be reached return errors that match the context's error and the
// cause (errors.Is for each).
func TestClientContextErrorsSayWhy(t *testing.T) {
	leaktest.Check(t)
	c := startFailover(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{c.servers[2].Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	c.kill(t, 1) // the leader, for good

	tp := log.TopicPartition{Topic: "t"}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	_, err = kc.Produce(pctx, tp, oneRecord(t, "x", -1), log.AcksAll)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)

	fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
	defer fcancel()
	_, err = kc.Fetch(fctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp}}, MaxWait: time.Minute})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)

	// A Poll: empty answers while MaxWait passes, then ctx's end.
	recs, err := cons.Poll(ctx)
	require.NoError(t, err)
	require.Empty(t, recs)
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	for err == nil {
		_, err = cons.Poll(cctx)
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)

	// The coordinator (node 1) too.
	gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
	defer gcancel()
	err = kc.CommitOffsets(gctx, "g", "", -1, map[log.TopicPartition]int64{tp: 1})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)
}

// A produce and a fetch that the leader keeps refusing as not its own
// (its leadership moving) are retried until their context ends, with an
// error that matches the context's and log.ErrNotLeader.
func TestClientNotLeaderUntilContextEnds(t *testing.T) {
	leaktest.Check(t)
	c := startFailover(t)
	c.refuse.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{c.servers[1].Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	tp := log.TopicPartition{Topic: "t"}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	_, err = kc.Produce(pctx, tp, oneRecord(t, "x", -1), log.AcksAll)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, log.ErrNotLeader, "%v", err)

	fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
	defer fcancel()
	_, err = kc.Fetch(fctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp}}, MaxWait: time.Minute})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, log.ErrNotLeader, "%v", err)

	// Within MaxWait, a fetch answers the partition's error instead.
	resp, err := kc.Fetch(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp}}, MaxWait: 300 * time.Millisecond})
	require.NoError(t, err)
	require.ErrorIs(t, resp.Partitions[0].Err, log.ErrNotLeader)

	c.refuse.Store(false)
	off, err := kc.Produce(ctx, tp, oneRecord(t, "y", -1), log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 0, off, "nothing refused was written")
}

// A leader that stops answering (a stopped process: its connection looks
// open) is given up on after the fetch's MaxWait and RequestTimeout, and
// the next leader is read: a consumer does not hang on it.
func TestClientGivesUpOnSilentLeader(t *testing.T) {
	leaktest.Check(t)
	c := startFailover(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{c.servers[1].Addr(), c.servers[2].Addr()}, RequestTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer kc.Close()
	tp := log.TopicPartition{Topic: "t"}
	_, err = c.brokers[2].Produce(ctx, tp, oneRecord(t, "b", -1), log.AcksAll)
	require.NoError(t, err)
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()

	c.hung.Store(1) // node 1, the leader, stops answering fetches
	c.leader.Store(2)
	var got []log.Record
	for len(got) == 0 {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err)
		got = append(got, recs...)
	}
	require.Equal(t, "b", string(got[0].Value), "read from the next leader")
}
