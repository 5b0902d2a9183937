package log

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/segment/batch"
)

// Compression is a record batch compression codec: Kafka's codec ids, the low
// 3 bits of a batch's attributes. The zero value is no compression.
type Compression int8

// Kafka's codecs.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLz4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLz4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

func (c Compression) valid() bool { return batch.ValidCompression(int(c)) }

// TopicCompression is a topic's compression.type: the codec its batches are
// stored with.
type TopicCompression int8

const (
	// TopicCompressionProducer (the zero value, Kafka's default "producer")
	// stores each batch as its producer sent it, compressed or not.
	TopicCompressionProducer TopicCompression = iota
	// TopicCompressionNone stores every batch uncompressed (Kafka's
	// "uncompressed"): compressed batches are decompressed on append.
	TopicCompressionNone
	// TopicCompressionGzip, TopicCompressionSnappy, TopicCompressionLz4 and
	// TopicCompressionZstd store every batch with that codec: a batch that
	// arrives with another is recompressed on append, as Kafka does, and
	// Partition.Append compresses with it.
	TopicCompressionGzip
	TopicCompressionSnappy
	TopicCompressionLz4
	TopicCompressionZstd
)

func (c TopicCompression) String() string {
	switch c {
	case TopicCompressionProducer:
		return "producer"
	case TopicCompressionNone:
		return "uncompressed"
	}
	if codec, ok := c.codec(); ok {
		return codec.String()
	}
	return fmt.Sprintf("TopicCompression(%d)", int(c))
}

// codec is the codec the topic stores batches with; false for
// TopicCompressionProducer (and unknown values).
func (c TopicCompression) codec() (Compression, bool) {
	switch c {
	case TopicCompressionNone:
		return CompressionNone, true
	case TopicCompressionGzip:
		return CompressionGzip, true
	case TopicCompressionSnappy:
		return CompressionSnappy, true
	case TopicCompressionLz4:
		return CompressionLz4, true
	case TopicCompressionZstd:
		return CompressionZstd, true
	}
	return CompressionNone, false
}

// appendCodec is the codec Partition.Append encodes with: the topic's, or
// none when the topic keeps what producers send.
func (c TopicCompression) appendCodec() int {
	codec, _ := c.codec()
	return int(codec)
}

// producedBatch validates a batch as a producer sent it
// (batch.ValidateProducedLimit: CRC, and for a compressed batch its records
// streamed through a pooled decoder) and, when the topic stores another
// codec than the batch's, returns it recompressed in a new buffer.
// Otherwise it returns b itself: the batch is stored as it arrived. Errors
// wrap ErrCorrupt for a bad batch, ErrRecordTooLarge (and
// batch.ErrTooLarge) for one whose records decompress past the partition's
// MaxDecompressedBytes, or past MaxMessageBytes when the topic stores them
// uncompressed: decompression stops there, so a decompression bomb costs
// the broker that much decoding at most, and changes nothing.
func (p *Partition) producedBatch(b []byte) ([]byte, batch.Header, error) {
	cfg := p.config()
	codec, recompress := cfg.Compression.codec()
	limit := p.maxInflate
	if recompress && codec == CompressionNone {
		limit = min(limit, cfg.MaxMessageBytes) // what it decompresses to is what is stored
	}
	h, err := batch.ValidateProducedLimit(b, limit)
	if err != nil {
		return nil, h, inflated(err)
	}
	if !recompress || int(codec) == h.Compression() || h.Size() != len(b) {
		return b, h, nil
	}
	out, err := batch.RecompressLimit(nil, b, h, int(codec), limit)
	if err != nil {
		return nil, h, inflated(err)
	}
	if len(out) > cfg.MaxMessageBytes {
		return nil, h, &RecordTooLargeError{Size: len(out), Max: cfg.MaxMessageBytes}
	}
	h, err = batch.ParseHeader(out)
	return out, h, err
}

// inflated makes a batch.ErrTooLarge an ErrRecordTooLarge too (Kafka's
// RECORD_TOO_LARGE).
func inflated(err error) error {
	if errors.Is(err, batch.ErrTooLarge) {
		return fmt.Errorf("%w (%w)", ErrRecordTooLarge, err)
	}
	return err
}
