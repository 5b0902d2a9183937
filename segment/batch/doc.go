// Package batch encodes, decodes and validates Kafka record batches, format v2
// (magic 2): the unit Strata writes to segment files and sends to consumers. The bytes
// are Kafka's own, so disk bytes, wire bytes and a Kafka broker's log are the same.
//
// A [Builder] encodes a batch; [Decode] checks one and calls a function for each record;
// [Validate] checks one without decoding it; [Batches] walks a buffer of concatenated
// batches (a segment read, a fetch response) and validates each; [Records] decodes a
// batch that Validate or Batches already checked, without checking it again. Keys,
// values and header values alias the batch bytes; nothing is allocated per record in
// either direction. [SetBaseOffset] and
// [SetPartitionLeaderEpoch] rewrite the two fields outside the CRC in place, so a broker
// can encode a batch first and assign its offsets later under its lock.
//
// # Control batches
//
// A control batch (attribute bit 5) holds one control record whose key names its type;
// the transaction markers, COMMIT and ABORT, are control batches that are also
// transactional (bit 4). [AppendMarker] writes one as Kafka does and [ParseMarker] reads
// it back (control.go has the layout of its key and value); [ParseControlKey] reads the
// type of any control record. Consumers skip control batches.
//
// # Compression
//
// A batch's records section (everything after the 61-byte header) may be compressed
// as a whole with one of Kafka's codecs, named by attribute bits 0-2: 1 gzip, 2 snappy,
// 3 lz4, 4 zstd. The header stays uncompressed and the CRC covers the compressed
// bytes, so a broker stores and serves such a batch exactly as the producer sent it.
// [Builder.SetCompression] writes them: snappy as one raw block and lz4 as an LZ4
// frame (64 KiB blocks, content checksum), as kgo and sarama do. Readers accept every
// framing Kafka clients write: raw snappy blocks (kgo, sarama) and snappy-java's
// xerial framing (Kafka's Java producer: the magic "\x82SNAPPY\x00", version and
// compatible version, then length-prefixed raw blocks); LZ4 frames, including those
// whose header checksum also covers the frame magic (Kafka before 0.10); gzip streams;
// zstd frames.
//
// [Validate] checks a compressed batch as Kafka's LogValidator does, streaming the
// payload through a pooled decoder and a 128 KiB window (keys, values and headers larger
// than it are skipped as they stream past, so memory does not grow with them): the
// same record checks as for an uncompressed batch, that the payload decompresses
// (checksums included), and that nothing follows the last record. [ValidateProduced]
// adds the rule for a producer's batch: inner offset deltas 0 to n-1. [Records] and
// [Decode] decompress transparently; [Decompress] turns a compressed batch into the
// equivalent uncompressed one.
//
// # Decompression bombs
//
// A few KB of payload can inflate to a GiB (zstd: 1000 MiB of zeros in 32 KB). Every
// decompression streams into a limit and stops as soon as it is passed, with
// [ErrTooLarge]: [DecompressLimit], [RecompressLimit], [ValidateProducedLimit] and
// [Filter.Limit] take the caller's; [Decompress], [Recompress], [ValidateProduced],
// [Records] and [Decode] apply [DefaultMaxDecompressed] (128 MiB). Decoders allocate
// for what the payload inflates to, up to the limit, never for what its headers
// claim. [Validate], which recovery uses, streams through its window whatever the
// size and calls a payload that inflates past 1 GiB corrupt.
//
// # Batch layout
//
// All integers are big-endian. Offsets are from the start of the batch.
//
//	 0  baseOffset            int64   offset of the first record (the base of the deltas)
//	 8  batchLength           int32   bytes after this field: batch size - 12
//	12  partitionLeaderEpoch  int32   -1 when unset
//	16  magic                 int8    2
//	17  crc                   uint32  CRC-32C (Castagnoli) of bytes 21 .. end
//	21  attributes            int16   bits 0-2 compression (0 none, 1 gzip, 2 snappy,
//	                                  3 lz4, 4 zstd), bit 3 timestamp type (1 =
//	                                  LogAppendTime), bit 4 transactional, bit 5 control,
//	                                  bit 6 delete horizon set
//	23  lastOffsetDelta       int32   last record's offset - baseOffset
//	27  baseTimestamp         int64   ms; the first record's timestamp
//	35  maxTimestamp          int64   ms; the largest record timestamp (CreateTime) or
//	                                  the broker's append time (LogAppendTime)
//	43  producerId            int64   -1 when not idempotent
//	51  producerEpoch         int16   -1 when not idempotent
//	53  baseSequence          int32   -1 when not idempotent
//	57  recordCount           int32
//	61  records               recordCount records, back to back
//
// The first 12 bytes (baseOffset, batchLength) are the "log overhead": enough to find
// the next batch. The CRC covers attributes through the end of the batch, so the base
// offset and the partition leader epoch can be rewritten without recomputing it.
//
// # Record layout
//
// Varints are zigzag base-128, as protobuf's sint32/sint64 or Go's
// [encoding/binary.AppendVarint]: at most 5 bytes for a varint, 10 for a varlong.
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - baseTimestamp (may be negative)
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 = null key
//	key             keyLength bytes
//	valueLength     varint   -1 = null value
//	value           valueLength bytes
//	headerCount     varint
//	headers         headerCount times:
//	    keyLength   varint   >= 0 (header keys are never null)
//	    key         keyLength bytes
//	    valueLength varint   -1 = null value
//	    value       valueLength bytes
//
// # What is checked
//
// [Validate], [Decode] and [Batches] return [ErrCorrupt] (wrapped with the reason) for:
// an unknown compression codec (5-7) or a compressed payload that does not decompress;
// magic other than 2; batchLength below 49 (an empty batch); a CRC mismatch; a negative
// base offset, last offset delta or record count; a last offset that overflows; more
// records than the offset range holds; a malformed varint; a record, key, value or
// header that does not fit, or fields that do not fill the record's length exactly; a
// record count that does not match the records; bytes after the last record; offset
// deltas not strictly increasing within [0, lastOffsetDelta]; and, for a CreateTime
// batch with records, a maxTimestamp other than the largest record timestamp. Offset
// deltas may have gaps (compaction removes records but keeps a batch's first and last
// offsets), and a batch may hold no records.
//
// # Torn tails
//
// A crash during an append leaves the last batch of a .log file cut short: its length
// field promises more bytes than the file holds, or fewer than 12 bytes of it remain.
// [PeekSize], [Validate] and [Batches] report that as [ErrShort], which also matches
// [io.ErrUnexpectedEOF]. A tail of zeros (space the file system extended but never
// wrote) reads as batchLength 0 and is [ErrCorrupt]. Recovery truncates the log at the
// start of the first batch that is either. A length field damaged to point past the end
// of the bytes cannot be told from a torn tail (the CRC cannot help: it is found through
// the length), so recovery handles both the same way.
//
// # Tests
//
// Plain `go test` runs the fuzz targets on their seed corpora and a randomized round
// trip (seed printed, replay with STRATA_BATCH_SEED=n); STRATA_SOAK=1 runs the
// randomized round trip for many more batches.
package batch
