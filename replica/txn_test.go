package replica_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/txn"
)

// txnProducer is a transactional producer of id through member b.
func txnProducer(t *testing.T, b *replica.Broker, id string, timeout time.Duration) *log.Producer {
	t.Helper()
	prod, err := log.NewProducer(b, log.ProducerConfig{TransactionalID: id, TransactionTimeout: timeout,
		Acks: log.AcksAll, Timeout: 20 * time.Second, Partitioner: log.PartitionerManual})
	require.NoError(t, err)
	return prod
}

// sendTxn sends one record of value prefix+"-"+p to each partition of ps
// in one transaction, and commits or aborts it.
func sendTxn(ctx context.Context, t *testing.T, prod *log.Producer, topic string, ps []int, prefix string, commit bool) {
	t.Helper()
	require.NoError(t, prod.BeginTransaction())
	for _, p := range ps {
		_, err := prod.Send(ctx, log.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d", prefix, p)})
		require.NoError(t, err)
	}
	if commit {
		require.NoError(t, prod.CommitTransaction(ctx))
	} else {
		require.NoError(t, prod.AbortTransaction(ctx))
	}
}

// readCommittedUntil reads topic's partitions ps through member b as a
// READ_COMMITTED consumer until it has seen a record whose value starts
// with last in each, and returns every value read, in order per partition.
func readCommittedUntil(ctx context.Context, t *testing.T, b *replica.Broker, topic string, ps []int, last string) map[int][]string {
	t.Helper()
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{topic}, MaxWait: 100 * time.Millisecond, Isolation: log.ReadCommitted})
	require.NoError(t, err)
	defer cons.Close()
	out := map[int][]string{}
	done := map[int]bool{}
	for len(done) < len(ps) {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err, "read so far: %v", out)
		for _, r := range recs {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			if strings.HasPrefix(string(r.Value), last) {
				done[r.Partition] = true
			}
		}
	}
	return out
}

// createTxnStateTopic makes the first transactional call, which creates
// __transaction_state, and waits until every member has applied it with
// a leader for each partition.
func createTxnStateTopic(t *testing.T, c *memberCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, ok := replica.TxnBackend(c.member(1)).TxnCoordinatorNode(ctx, "probe")
	require.True(t, ok)
	for _, b := range c.members {
		if b == nil {
			continue
		}
		c.waitImage(b, log.TransactionStateTopic, func(img *controller.Image) bool {
			tt, ok := img.Topic(log.TransactionStateTopic)
			for _, st := range tt.Partitions {
				ok = ok && st.Leader != controller.NoLeader
			}
			return ok
		})
	}
}

// txnIDOn returns a transactional id whose coordinator is member id.
func txnIDOn(t *testing.T, c *memberCluster, id int) string {
	t.Helper()
	tt, ok := c.any().Image().Topic(log.TransactionStateTopic)
	require.True(t, ok)
	for i := range 10000 {
		tid := fmt.Sprintf("txn-%d", i)
		if tt.Partitions[txn.PartitionFor(tid, len(tt.Partitions))].Leader == id {
			return tid
		}
	}
	t.Fatalf("no transactional id coordinated by member %d", id)
	return ""
}

// Transactions through a member, over partitions led by different
// members: the committed ones are read by a READ_COMMITTED consumer on
// another member, exactly once and in order, the aborted one never.
func TestTxnCommitAbortAcrossLeaders(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testTxnCommitAbortAcrossLeaders(t, tr) })
	}
}

func testTxnCommitAbortAcrossLeaders(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	leaders := map[int]bool{}
	for p := range 3 {
		leaders[c.leader("t", p)] = true
	}
	require.GreaterOrEqual(t, len(leaders), 2, "the partitions' leaders")

	ps := []int{0, 1, 2}
	prod := txnProducer(t, c.member(1), "etl", 0)
	defer prod.Close()
	require.NoError(t, prod.InitTransactions(ctx))
	sendTxn(ctx, t, prod, "t", ps, "c1", true)
	sendTxn(ctx, t, prod, "t", ps, "a1", false)
	sendTxn(ctx, t, prod, "t", ps, "c2", true)
	sendTxn(ctx, t, prod, "t", ps, "end", true)

	got := readCommittedUntil(ctx, t, c.member(2), "t", ps, "end")
	for _, p := range ps {
		require.Equal(t, []string{fmt.Sprintf("c1-%d", p), fmt.Sprintf("c2-%d", p), fmt.Sprintf("end-%d", p)}, got[p], "partition %d", p)
	}
	// The transaction state is replicated: every member names the same
	// coordinator, which alone runs it.
	tp, n := 0, replica.DefaultTransactionStatePartitions
	tp = txn.PartitionFor("etl", n)
	coord := c.leader(log.TransactionStateTopic, tp)
	for id := 1; id <= 3; id++ {
		node, ok := replica.TxnBackend(c.member(id)).TxnCoordinatorNode(ctx, "etl")
		require.True(t, ok)
		require.EqualValues(t, coord, node)
		_, err := replica.TxnBackend(c.member(id)).TxnCoordinator(ctx, "etl")
		require.Equal(t, id == coord, err == nil, "member %d: %v", id, err)
	}
}

// A zombie: a producer of a transactional id whose coordinator is a third
// member is fenced by a newer one of the same id, on another member; the
// zombie's open transaction is aborted, its later sends and commit fail
// with ErrProducerFenced, and a READ_COMMITTED reader sees only the new
// producer's records.
func TestTxnZombieFenced(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createTxnStateTopic(t, c)
	id := txnIDOn(t, c, 3)

	zombie := txnProducer(t, c.member(1), id, 0)
	defer zombie.Close()
	require.NoError(t, zombie.InitTransactions(ctx))
	require.NoError(t, zombie.BeginTransaction())
	_, err := zombie.Send(ctx, log.Record{Topic: "t", Partition: 0, Value: []byte("zombie-0")})
	require.NoError(t, err)

	fresh := txnProducer(t, c.member(2), id, 0)
	defer fresh.Close()
	require.NoError(t, fresh.InitTransactions(ctx)) // fences the zombie, aborts its transaction

	_, serr := zombie.Send(ctx, log.Record{Topic: "t", Partition: 1, Value: []byte("zombie-1")})
	cerr := zombie.CommitTransaction(ctx)
	require.Error(t, cerr, "the zombie's commit (its send: %v)", serr)
	require.ErrorIs(t, cerr, log.ErrProducerFenced)

	ps := []int{0, 1}
	sendTxn(ctx, t, fresh, "t", ps, "fresh", true)
	sendTxn(ctx, t, fresh, "t", ps, "end", true)
	got := readCommittedUntil(ctx, t, c.member(3), "t", ps, "end")
	for _, p := range ps {
		require.Equal(t, []string{fmt.Sprintf("fresh-%d", p), fmt.Sprintf("end-%d", p)}, got[p], "partition %d", p)
	}
}

// Strata's transactional Producer over kafka.Dial to a cluster: the
// Client finds each transactional id's coordinator with FindCoordinator,
// its produces are verified at the coordinator by the partitions' leaders
// (KIP-890), and a READ_COMMITTED Consumer over the same Client reads the
// committed transactions only.
func TestTxnProducerOverKafkaDial(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "kafka")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.member(1).Addr()}, Dial: c.net.Node("client").Dial})
	require.NoError(t, err)
	defer kc.Close()

	ps := []int{0, 1, 2}
	prod, err := log.NewProducer(kc, log.ProducerConfig{TransactionalID: "dialed", Acks: log.AcksAll,
		Timeout: 20 * time.Second, Partitioner: log.PartitionerManual})
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.InitTransactions(ctx))
	sendTxn(ctx, t, prod, "t", ps, "c1", true)
	sendTxn(ctx, t, prod, "t", ps, "a1", false)
	sendTxn(ctx, t, prod, "t", ps, "end", true)

	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 100 * time.Millisecond, Isolation: log.ReadCommitted})
	require.NoError(t, err)
	defer cons.Close()
	got := map[int][]string{}
	for ended := 0; ended < len(ps); {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err, "read so far: %v", got)
		for _, r := range recs {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			if strings.HasPrefix(string(r.Value), "end") {
				ended++
			}
		}
	}
	for _, p := range ps {
		require.Equal(t, []string{fmt.Sprintf("c1-%d", p), fmt.Sprintf("end-%d", p)}, got[p], "partition %d", p)
	}
	// Every member names the coordinator; only it runs it.
	node, ok := replica.TxnBackend(c.member(2)).TxnCoordinatorNode(ctx, "dialed")
	require.True(t, ok)
	coord, err := replica.TxnBackend(c.member(int(node))).TxnCoordinator(ctx, "dialed")
	require.NoError(t, err)
	select { // the markers are written; the completion may still be
	case <-coord.Idle("dialed"):
	case <-ctx.Done():
		t.Fatal("the last transaction never completed")
	}
	meta, ok := coord.Describe("dialed")
	require.True(t, ok)
	require.Equal(t, txn.CompleteCommit, meta.State)
}
