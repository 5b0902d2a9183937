package log

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/segment/batch"
)

// The trusted path: a batch that this process's Producer has just encoded
// with its batch.Builder goes to the partition without being validated
// again. Validation (batch.ValidateProduced: the CRC over the whole batch
// and a walk over its records, or their decompression) guards against bytes
// a network or a user made; a batch the Builder wrote is valid by
// construction, so checking it again costs the CPU of reading it twice for
// nothing. Only the header is parsed, as Partition.Append does for the
// batches it builds itself, and the batch goes through appendValid, so every
// rule of the append (the idempotent producer's sequence checks, a
// read-only partition, durability with FlushMessages) holds as on the
// validating path.
//
// Nothing but the Producer reaches it (a BuiltBatch is made only in this
// package), and only when its Client is a *Broker of this process or a
// Client that passes the Broker's BuiltProducer through
// (client_builtproducer.go), never one that only embeds a Broker.
// Broker.ProduceBatch, which takes bytes from anywhere (the Kafka wire
// server, a user's Client), keeps full validation.

// produceBuilt is ProduceBatch for a batch that a Producer of this process
// built with batch.Builder (and, on a retry, changed only with
// batch.SetBaseOffset, SetPartitionLeaderEpoch and SetProducer, which keep it
// valid). It checks what ProduceBatch checks about the request (the
// partition, the in-sync replicas AcksAll needs, MaxMessageBytes) but not
// the bytes. A topic that stores another codec than the batch's takes the
// validating path, which recompresses.
//
// With given, the caller gives raw up: it never writes to it again, and the
// partition may keep it in its tail for readers (tail.go), with spans, where
// its records are (batch.Builder.Spans; nil if it has none).
func (b *Broker) produceBuilt(ctx context.Context, tp TopicPartition, raw []byte, spans []batch.Span, acks Acks, given bool) (ProduceResult, error) {
	return b.produceWith(ctx, tp, raw, acks, func(p *Partition, raw []byte) (int64, int64, error) {
		return p.appendBuilt(raw, spans, given)
	})
}

// appendBuilt is AppendBatch for a batch built by batch.Builder in this
// process: the header is parsed, not the records. It falls back to
// AppendBatch (full validation, recompression) when the topic stores another
// codec than the batch's. With keep, b may stay in the tail (tail.go), with
// the spans of its records.
func (p *Partition) appendBuilt(b []byte, spans []batch.Span, keep bool) (base, next int64, err error) {
	if len(b) > p.config().MaxMessageBytes {
		return 0, 0, fmt.Errorf("%s: %w", p, &RecordTooLargeError{Size: len(b), Max: p.config().MaxMessageBytes})
	}
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, 0, fmt.Errorf("log: append to %s: %w", p, err)
	}
	if h.Size() != len(b) {
		return 0, 0, fmt.Errorf("log: append to %s: %w: %d bytes after the batch", p, ErrCorrupt, len(b)-h.Size())
	}
	if codec, ok := p.config().Compression.codec(); ok && int(codec) != h.Compression() {
		return p.AppendBatch(b)
	}
	return p.appendValid(b, h, spans, keep)
}
