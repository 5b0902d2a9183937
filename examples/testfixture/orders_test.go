package orders

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
)

func TestPlaceKeepsACustomersOrdersTogether(t *testing.T) {
	// A broker in memory with a 3-partition topic; closed by t.Cleanup.
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("orders", 3))

	svc, err := NewService(b)
	require.NoError(t, err)
	defer svc.Close()

	ctx := context.Background()
	var parts []int
	for i, id := range []string{"o1", "o2", "o3"} {
		p, off, err := svc.Place(ctx, Order{ID: id, Customer: "ada", Total: 10 * (i + 1)})
		require.NoError(t, err)
		require.EqualValues(t, i, off, "offsets grow on the customer's partition")
		parts = append(parts, p)
	}
	require.Equal(t, parts[0], parts[1])
	require.Equal(t, parts[0], parts[2])
	require.Equal(t, log.KeyPartition([]byte("ada"), 3), parts[0], "Kafka's partitioner")

	// Read back what the service published, straight from the partition.
	p, err := b.Partition("orders", parts[0])
	require.NoError(t, err)
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	var last Order
	require.NoError(t, json.Unmarshal(recs[2].Value, &last))
	require.Equal(t, Order{ID: "o3", Customer: "ada", Total: 30}, last)
}

func TestPlaceToAMissingTopicFails(t *testing.T) {
	b := logtest.New(t, logtest.InMemory())
	svc, err := NewService(b)
	require.NoError(t, err)
	defer svc.Close()
	// The producer waits for a topic it does not know (Kafka's
	// max.block.ms): the caller's context bounds the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err = svc.Place(ctx, Order{ID: "o1", Customer: "ada"})
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
