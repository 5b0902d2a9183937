package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
)

// An idempotent Strata Producer over the wire: InitProducerId hands out
// distinct ids, the batches carry them, and a batch sent twice is stored
// once, its duplicate answered with the first offsets.
func TestIdempotentProducerOverTheWire(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("orders", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()

	a, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	a2, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, a.ID, a2.ID, "ids are never handed out twice")

	p, err := log.NewProducer(c, log.ProducerConfig{Idempotent: true})
	require.NoError(t, err)
	for i := range 20 {
		_, err := p.Send(ctx, log.Record{Topic: "orders", Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	part, err := b.Partition("orders", 0)
	require.NoError(t, err)
	raw, err := part.ReadBatches(0, 1<<20, part.EndOffset())
	require.NoError(t, err)
	var last []byte
	require.NoError(t, batch.Batches(raw, func(bb []byte, h batch.Header) error {
		require.GreaterOrEqual(t, h.ProducerID, int64(0), "an idempotent batch carries its producer id")
		last = append([]byte(nil), bb...)
		return nil
	}))

	// The last batch again, as a retry would send it: nothing is appended.
	end := part.EndOffset()
	batch.SetBaseOffset(last, 0)
	res, err := c.ProduceBatch(ctx, log.TopicPartition{Topic: "orders"}, last, log.AcksAll)
	require.NoError(t, err)
	require.Equal(t, end-1, res.BaseOffset, "a duplicate gets the offset it got the first time")
	require.Equal(t, end, part.EndOffset(), "and appends nothing")
}
