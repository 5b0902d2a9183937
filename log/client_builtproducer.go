package log

import (
	"context"
	"reflect"

	"github.com/strata-log/strata/segment/batch"
)

// BuiltProducer is an optional capability of a Client: appending, in this
// process, a batch that a Producer of this package built, without
// validating its bytes again (partition_trusted.go). A *Broker has it; a
// Producer whose Client has it sends every batch through ProduceBuilt
// instead of ProduceBatch, and records where its records are, so the broker
// can keep the bytes for its readers.
//
// A Client that wraps another (to count, trace or route its calls) passes
// the capability through by implementing both methods: ProduceBuilt calls
// the wrapped Client's ProduceBuilt with the same BuiltBatch, and
// BuiltProducerOf returns the wrapper itself. A method promoted from an
// embedded *Broker returns the Broker, not the wrapper, so a Client that
// embeds a Broker and overrides ProduceBatch keeps its ProduceBatch called
// until it also defines BuiltProducerOf.
type BuiltProducer interface {
	// ProduceBuilt is ProduceBatch for b. It checks what ProduceBatch
	// checks of the request (the partition, the in-sync replicas of
	// AcksAll, MaxMessageBytes), and parses only b's header.
	ProduceBuilt(ctx context.Context, tp TopicPartition, b BuiltBatch, acks Acks) (ProduceResult, error)
	// BuiltProducerOf returns the Client whose capability this is: the
	// receiver itself, a pointer.
	BuiltProducerOf() Client
}

// BuiltBatch is a record batch that a Producer of this process built with
// batch.Builder: only package log makes one, so ProduceBuilt takes no bytes
// from anywhere else. The zero BuiltBatch is refused as a batch too short.
type BuiltBatch struct {
	raw   []byte
	spans []batch.Span
	given bool
}

// Bytes returns the batch in Kafka's record batch format. The caller must
// not modify or keep them: the broker may keep them for its readers.
func (b BuiltBatch) Bytes() []byte { return b.raw }

var _ BuiltProducer = (*Broker)(nil)

// ProduceBuilt appends b by the trusted path (see BuiltProducer).
func (b *Broker) ProduceBuilt(ctx context.Context, tp TopicPartition, bb BuiltBatch, acks Acks) (ProduceResult, error) {
	return b.produceBuilt(ctx, tp, bb.raw, bb.spans, acks, bb.given)
}

// BuiltProducerOf returns b.
func (b *Broker) BuiltProducerOf() Client { return b }

// builtProducer returns c's BuiltProducer capability, or nil when c has
// none or has it only by a method promoted from a Client it embeds.
func builtProducer(c Client) BuiltProducer {
	bp, ok := c.(BuiltProducer)
	if !ok {
		return nil
	}
	of := bp.BuiltProducerOf()
	// Compared only when the types are (comparing two values of a
	// non-comparable type panics).
	if t := reflect.TypeOf(c); t != reflect.TypeOf(of) || !t.Comparable() || of != c {
		return nil
	}
	return bp
}
