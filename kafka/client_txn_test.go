package kafka

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// committedValues reads topic of b below its last stable offset with a
// READ_COMMITTED consumer.
func committedValues(t *testing.T, b *log.Broker, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{topic}, Isolation: log.ReadCommitted, MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	n, err := b.Partitions(ctx, topic)
	require.NoError(t, err)
	var out []string
	for {
		done := true
		for i := range n {
			end, err := b.ListOffset(ctx, log.TopicPartition{Topic: topic, Partition: i}, log.LatestStableOffset)
			require.NoError(t, err)
			pos, err := c.Position(topic, i)
			require.NoError(t, err)
			done = done && pos >= end
		}
		if done {
			slices.Sort(out)
			return out
		}
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
}

// A transactional log.Producer over kafka.Dial (the Client's
// InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, TxnOffsetCommit and EndTxn) against a Strata server:
// committed records and offsets become visible, aborted ones never; a
// second producer of the id fences the first.
func TestClientTransactionalProducer(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("out", 2), logtest.Topic("in", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })

	p, err := log.NewProducer(c, log.ProducerConfig{TransactionalID: "remote", Linger: -1})
	require.NoError(t, err)
	defer p.Close()
	in0 := log.TopicPartition{Topic: "in", Partition: 0}
	txn := func(commit bool, offset int64, vals ...string) {
		t.Helper()
		require.NoError(t, p.BeginTransaction())
		for _, v := range vals {
			_, err := p.Send(ctx, log.Record{Topic: "out", Key: []byte(v), Value: []byte(v)})
			require.NoError(t, err)
		}
		require.NoError(t, p.SendOffsetsToTransaction(ctx, map[log.TopicPartition]int64{in0: offset}, log.GroupMetadata{Group: "g", Generation: -1}))
		if commit {
			require.NoError(t, p.CommitTransaction(ctx))
		} else {
			require.NoError(t, p.AbortTransaction(ctx))
		}
	}
	soon := func(want []string, offset int64) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, err := c.FetchOffsets(ctx, "g", []log.TopicPartition{in0})
			require.NoError(t, err)
			return slices.Equal(committedValues(t, b, "out"), want) && maps.Equal(got, map[log.TopicPartition]int64{in0: offset})
		}, 10*time.Second, 5*time.Millisecond)
	}
	txn(true, 2, "a", "b")
	soon([]string{"a", "b"}, 2)
	txn(false, 5, "x", "y", "z")
	soon([]string{"a", "b"}, 2)
	txn(true, 7, "c")
	soon([]string{"a", "b", "c"}, 7)

	fresh, err := log.NewProducer(c, log.ProducerConfig{TransactionalID: "remote"})
	require.NoError(t, err)
	defer fresh.Close()
	require.NoError(t, fresh.InitTransactions(ctx))
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, log.Record{Topic: "out", Value: []byte("zombie")})
	require.ErrorIs(t, err, log.ErrProducerFenced)
	require.Error(t, p.CommitTransaction(ctx))
	soon([]string{"a", "b", "c"}, 7)
}

// A Client keeps one producer id per transactional id for its Produce
// requests: a new id for the same transactional id (its epochs ran out, or
// it expired) replaces the old one, so a long-lived Client whose producers
// come and go does not grow by an entry per producer id ever given.
func TestClientRemembersOneProducerPerTransactionalID(t *testing.T) {
	c := &Client{}
	c.rememberTxnProducer("a", 1)
	c.rememberTxnProducer("b", 2)
	c.rememberTxnProducer("a", 1) // a new epoch of the same id
	require.Equal(t, map[int64]string{1: "a", 2: "b"}, c.txnIDs)
	for pid := int64(3); pid < 1000; pid++ {
		c.rememberTxnProducer("a", pid) // a new producer id each time
	}
	require.Equal(t, map[int64]string{999: "a", 2: "b"}, c.txnIDs)
}
