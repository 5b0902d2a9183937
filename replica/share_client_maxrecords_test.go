package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// TestShareConsumerOverClientMaxRecords: a ShareConsumer over a
// kafka.Client whose partitions have several leaders gets at most
// MaxRecords a Poll, as Kafka's max.poll.records: the Client fetched up to
// MaxRecords from each leader, up to 3 × MaxRecords here.
func TestShareConsumerOverClientMaxRecords(t *testing.T) {
	leaktest.Check(t)
	const n, parts, max = 60, 3, 3
	c := shareClusterOver(t, "local", "q", parts, "g")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := log.NewProducer(c.member(1), log.ProducerConfig{Acks: log.AcksAll, Timeout: 30 * time.Second})
	require.NoError(t, err)
	for i := range n { // keyed: to every partition
		_, err := prod.Send(ctx, log.Record{Topic: "q", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	for p, end := range ends(t, c.member(1), "q", parts) {
		require.NotZero(t, end, "partition %d", p)
	}
	leaders := map[int]bool{}
	for p := range parts {
		leaders[c.leader("q", p)] = true
	}
	require.Greater(t, len(leaders), 1, "the partitions' leaders")
	cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.member(1).Addr()}})
	require.NoError(t, err)
	defer cl.Close()
	sc, err := log.NewShareConsumer(cl, log.ShareConsumerConfig{Group: "g", Topics: []string{"q"}, MaxRecords: max, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer sc.Close(context.Background()) // on failure; a second Close is nil
	seen := map[string]bool{}
	for len(seen) < n {
		recs, err := sc.Poll(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(recs), max, "records of one Poll")
		for _, r := range recs {
			require.False(t, seen[string(r.Value)], "%s twice", r.Value)
			seen[string(r.Value)] = true
			require.NoError(t, r.Accept())
		}
	}
	require.NoError(t, sc.Close(context.Background()))
}
