package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/strata-log/strata/internal/errs"
)

// HeaderSize is the size of a record batch header: everything before the first record.
const HeaderSize = 61

// Magic is the only record batch format version this package reads and writes.
const Magic = 2

// Byte positions of the header fields.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers everything from here to the end of the batch
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// logOverhead is the base offset and length fields, which Length does not count.
	logOverhead = 12
	// minLength is the smallest valid Length: a batch with no records.
	minLength = HeaderSize - logOverhead
)

// Attribute bits.
const (
	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var (
	// ErrCorrupt marks every kind of damage: a bad CRC, a length or count that does not
	// match the bytes, a malformed varint, a magic other than 2, offsets or timestamps
	// that disagree with the header. Test for it with errors.Is.
	ErrCorrupt = errs.ErrCorrupt // log.ErrCorrupt

	// ErrCompressed is no longer returned: compressed batches are read and
	// validated like any other.
	//
	// Deprecated: kept for callers that test for it; nothing returns it.
	ErrCompressed = errors.New("batch: compressed record batches are not supported yet")

	// ErrTooLarge is returned when the records of a compressed batch decompress
	// to more than the caller's limit (DecompressLimit, RecompressLimit,
	// ValidateProducedLimit, Filter.Limit; DefaultMaxDecompressed for the
	// others): a decompression bomb, or a batch too large for this reader.
	// Decompression stops as soon as the limit is passed. It is not
	// ErrCorrupt: the batch may be intact.
	ErrTooLarge = errors.New("batch: records decompress past the limit")

	// ErrShort is returned when the bytes end before the batch does: a torn tail.
	// errors.Is(err, io.ErrUnexpectedEOF) is also true for it.
	ErrShort error = shortError{}
)

type shortError struct{}

func (shortError) Error() string { return "batch: incomplete record batch" }
func (shortError) Unwrap() error { return io.ErrUnexpectedEOF }

// castagnoli is the CRC-32C table; hash/crc32 uses SSE4.2 (or the ARM64 CRC
// instructions) for it. Written once at package initialisation, read-only after.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func shortf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrShort}, args...)...)
}

// Header is the decoded 61-byte header of a record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field: Size() - 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the size in bytes of the whole batch, header included.
func (h Header) Size() int { return logOverhead + int(h.Length) }

// LastOffset is the offset of the batch's last record (or, for a batch emptied by
// compaction, of the last record it once held).
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec id in attribute bits 0-2: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func (h Header) Compression() int { return int(h.Attributes & attrCompression) }

// LogAppendTime reports attribute bit 3: the records' timestamp is MaxTimestamp, set by
// the broker, rather than each record's create time.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports attribute bit 4.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports attribute bit 5: the batch holds transaction markers, not user records.
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// PeekSize returns the size of the whole batch that starts b, read from its first 12
// bytes (base offset and length). It returns ErrShort when b has fewer than 12 bytes and
// ErrCorrupt when the length is smaller than an empty batch's. It reads nothing past
// byte 12; callers compare the size against their own limit (a maximum batch size).
func PeekSize(b []byte) (int, error) {
	if len(b) < logOverhead {
		return 0, shortf("%d bytes, need %d to read the batch length", len(b), logOverhead)
	}
	n := int32(binary.BigEndian.Uint32(b[offLength:]))
	if n < minLength {
		return 0, corruptf("batch length %d is less than the minimum %d", n, minLength)
	}
	if int64(n) > math.MaxInt-logOverhead {
		return 0, corruptf("batch length %d does not fit in an int", n)
	}
	return logOverhead + int(n), nil
}

// ParseHeader decodes the header at the start of b. It needs len(b) >= HeaderSize
// (ErrShort otherwise), and checks the magic and that Length is at least an empty
// batch's; it does not check the CRC or that b holds the whole batch (see Validate).
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, shortf("%d bytes, need %d for the batch header", len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
	if h.Magic != Magic {
		return h, corruptf("magic %d, want %d", h.Magic, Magic)
	}
	if h.Length < minLength {
		return h, corruptf("batch length %d is less than the minimum %d", h.Length, minLength)
	}
	return h, nil
}

// checkHeader checks the header fields against each other: what can be known without
// reading the records.
func checkHeader(h *Header) error {
	if h.BaseOffset < 0 {
		return corruptf("negative base offset %d", h.BaseOffset)
	}
	if h.LastOffsetDelta < 0 {
		return corruptf("negative last offset delta %d", h.LastOffsetDelta)
	}
	if h.BaseOffset > math.MaxInt64-1-int64(h.LastOffsetDelta) {
		return corruptf("last offset overflows: base %d + delta %d", h.BaseOffset, h.LastOffsetDelta)
	}
	if h.NumRecords < 0 {
		return corruptf("negative record count %d", h.NumRecords)
	}
	if int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return corruptf("%d records do not fit in offset delta range [0, %d]", h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}

// checkCRC verifies the CRC of the whole batch b (len(b) == h.Size()).
func checkCRC(b []byte, h *Header) error {
	if sum := crc32.Checksum(b[offAttributes:], castagnoli); sum != h.CRC {
		return corruptf("crc mismatch: stored %#08x, computed %#08x", h.CRC, sum)
	}
	return nil
}

// SetBaseOffset writes the base offset of the batch at the start of b. The field is
// outside the CRC, so the batch stays valid: the broker assigns offsets after encoding.
// It panics if len(b) < 8.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes the partition leader epoch of the batch at the start of
// b. The field is outside the CRC. It panics if len(b) < 16.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
