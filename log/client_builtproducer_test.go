package log

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// passClient wraps a *Broker as logmetrics.Backend does and passes its
// BuiltProducer through, counting the calls of each produce path.
type passClient struct {
	*Broker
	built, batches atomic.Int32
}

func (c *passClient) ProduceBatch(ctx context.Context, tp TopicPartition, raw []byte, acks Acks) (ProduceResult, error) {
	c.batches.Add(1)
	return c.Broker.ProduceBatch(ctx, tp, raw, acks)
}

func (c *passClient) ProduceBuilt(ctx context.Context, tp TopicPartition, b BuiltBatch, acks Acks) (ProduceResult, error) {
	c.built.Add(1)
	return c.Broker.ProduceBuilt(ctx, tp, b, acks)
}

func (c *passClient) BuiltProducerOf() Client { return c }

// valueClient is a wrapper of a non-comparable type that claims its
// Broker's capability by value: comparing it must not panic.
type valueClient struct {
	*Broker
	tags []string
}

func (c valueClient) BuiltProducerOf() Client { return c }

func (c valueClient) String() string { return strings.Join(c.tags, ",") }

// TestProducerWrapperPassesFastPath: a Client that wraps a *Broker and
// passes its BuiltProducer through gets the trusted path: every batch goes
// through its ProduceBuilt, none through its ProduceBatch, and the records
// are stored. One that only embeds a Broker keeps its ProduceBatch (see
// TestProducerWrappedBrokerValidates), and so does one whose
// BuiltProducerOf is not comparable.
func TestProducerWrapperPassesFastPath(t *testing.T) {
	b, _ := prodBroker(t, TopicConfig{})
	c := &passClient{Broker: b}
	pr := newProd(t, c, ProducerConfig{Linger: -1})
	require.Same(t, c, pr.broker, "the wrapper's capability is taken")
	for i := range 10 {
		_, err := pr.Send(context.Background(), Record{Topic: "t", Value: val(i)})
		require.NoError(t, err)
	}
	require.Positive(t, c.built.Load(), "batches went through the wrapper's ProduceBuilt")
	require.Zero(t, c.batches.Load(), "no batch went through ProduceBatch")
	require.Len(t, readAll(t, b, 0), 10)

	require.Nil(t, builtProducer(valueClient{Broker: b}), "a non-comparable claim is refused, without a panic")
	require.Nil(t, builtProducer(struct{ Client }{b}), "an embedded interface hides the capability")
}
