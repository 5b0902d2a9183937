package log

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-log/strata/vfs"
)

// Producer state snapshot files, in Kafka's format (ProducerStateManager's
// writeSnapshot and readSnapshot, version 1), so kafka-dump-log.sh reads
// them. The file <offset, 20 digits>.snapshot in the partition's directory
// holds the state reflecting the log below that offset. Big-endian:
//
//	version   int16   1
//	crc       uint32  CRC-32C of every byte after this field
//	count     int32   number of entries
//	entries   count × 46 bytes:
//	  producer_id               int64
//	  epoch                     int16
//	  last_sequence             int32   -1: no batch known
//	  last_offset               int64   -1: no batch known
//	  offset_delta              int32   last offset - first offset of the batch
//	  timestamp                 int64   the batch's max timestamp (ms)
//	  coordinator_epoch         int32   of the producer's last marker, -1: none
//	  current_txn_first_offset  int64   of its open transaction, -1: none
//
// Kafka writes one entry per producer, its last batch. Strata writes one per
// kept batch, up to 5, oldest first, so a restart keeps the whole duplicate
// window; Kafka, reading such a file, keeps the last entry of each producer
// id, which is the one it would have written. Each entry's timestamp is its
// batch's, so the timestamp of a transaction marker after the last batch
// (the producer's last timestamp, for expiration) is kept only for a
// producer with no batch left: after a restart such a producer's expiration
// counts from its last batch, at most a transaction timeout earlier. The
// transaction fields are the same in every entry of a producer; an open
// transaction is read back as open, with its first offset. A torn file, a bad CRC, a
// version other than 1 or a length that does not match the count is
// ErrCorruptSnapshot: the caller falls back to an older snapshot or to a
// replay of the whole log (loadProducerStateDir does).

const (
	producerSnapshotExt     = ".snapshot"
	producerSnapshotVersion = 1
	snapshotHeaderSize      = 2 + 4 + 4 // version, crc, count
	snapshotCRCStart        = 6         // the CRC covers the bytes from the count on
	snapshotEntrySize       = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
)

// ErrCorruptSnapshot marks a producer snapshot that failed its checks. It
// matches ErrCorrupt too.
var ErrCorruptSnapshot = fmt.Errorf("log: corrupt producer snapshot: %w", ErrCorrupt)

// producerSnapshotName is the path of the snapshot at offset in dir.
func producerSnapshotName(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, producerSnapshotExt))
}

// snapshotEntry is one entry of a snapshot file.
type snapshotEntry struct {
	producerID       int64
	epoch            int16
	lastSeq          int32
	lastOffset       int64
	offsetDelta      int32
	timestamp        int64
	coordinatorEpoch int32
	txnFirstOffset   int64
}

// encodeProducerSnapshot returns the snapshot file's bytes for s.
func encodeProducerSnapshot(s *ProducerState) []byte {
	ids := make([]int64, 0, len(s.producers))
	n := 0
	for id, e := range s.producers {
		ids = append(ids, id)
		n += max(int(e.n), 1)
	}
	slices.Sort(ids)
	be := binary.BigEndian
	buf := make([]byte, snapshotHeaderSize, snapshotHeaderSize+n*snapshotEntrySize)
	be.PutUint16(buf, producerSnapshotVersion)
	be.PutUint32(buf[snapshotCRCStart:], uint32(n))
	put := func(x snapshotEntry) {
		buf = be.AppendUint64(buf, uint64(x.producerID))
		buf = be.AppendUint16(buf, uint16(x.epoch))
		buf = be.AppendUint32(buf, uint32(x.lastSeq))
		buf = be.AppendUint64(buf, uint64(x.lastOffset))
		buf = be.AppendUint32(buf, uint32(x.offsetDelta))
		buf = be.AppendUint64(buf, uint64(x.timestamp))
		buf = be.AppendUint32(buf, uint32(x.coordinatorEpoch))
		buf = be.AppendUint64(buf, uint64(x.txnFirstOffset))
	}
	for _, id := range ids {
		e := s.producers[id]
		t := s.txnOf(id)
		x := snapshotEntry{producerID: id, epoch: e.epoch, coordinatorEpoch: t.coordinatorEpoch, txnFirstOffset: t.txnFirstOffset}
		if e.n == 0 {
			x.lastSeq, x.lastOffset, x.timestamp = noSequence, -1, e.lastTimestamp
			put(x)
			continue
		}
		for i := range int(e.n) {
			m := e.batch(i)
			x.lastSeq, x.lastOffset, x.offsetDelta, x.timestamp = m.LastSeq, m.LastOffset, m.OffsetDelta, m.MaxTimestamp
			put(x)
		}
	}
	be.PutUint32(buf[2:], crc32.Checksum(buf[snapshotCRCStart:], snapshotCRCTable))
	return buf
}

var snapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)

// decodeProducerSnapshot parses a snapshot file's bytes into a state whose
// EndOffset is offset.
func decodeProducerSnapshot(b []byte, offset int64) (*ProducerState, error) {
	if len(b) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorruptSnapshot, len(b))
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(b)); v != producerSnapshotVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptSnapshot, v, producerSnapshotVersion)
	}
	if stored, sum := be.Uint32(b[2:]), crc32.Checksum(b[snapshotCRCStart:], snapshotCRCTable); stored != sum {
		return nil, fmt.Errorf("%w: crc mismatch: stored %#08x, computed %#08x", ErrCorruptSnapshot, stored, sum)
	}
	n := int64(int32(be.Uint32(b[snapshotCRCStart:])))
	if n < 0 || int64(len(b)) != snapshotHeaderSize+n*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, n, len(b))
	}
	s := NewProducerState(offset)
	var prev int64 = NoProducerID
	for p := snapshotHeaderSize; p < len(b); p += snapshotEntrySize {
		x := snapshotEntry{
			producerID:       int64(be.Uint64(b[p:])),
			epoch:            int16(be.Uint16(b[p+8:])),
			lastSeq:          int32(be.Uint32(b[p+10:])),
			lastOffset:       int64(be.Uint64(b[p+14:])),
			offsetDelta:      int32(be.Uint32(b[p+22:])),
			timestamp:        int64(be.Uint64(b[p+26:])),
			coordinatorEpoch: int32(be.Uint32(b[p+34:])),
			txnFirstOffset:   int64(be.Uint64(b[p+38:])),
		}
		if x.producerID < 0 || x.offsetDelta < 0 || (x.lastOffset >= 0 && x.lastOffset < int64(x.offsetDelta)) {
			return nil, fmt.Errorf("%w: entry at byte %d: producer %d, last offset %d, offset delta %d", ErrCorruptSnapshot, p, x.producerID, x.lastOffset, x.offsetDelta)
		}
		e, ok := s.producers[x.producerID]
		// Entries of one producer follow each other, oldest first; a later
		// entry of another epoch, or after other producers', replaces the
		// earlier ones as in Kafka (the last entry read wins).
		if !ok || x.producerID != prev || e.epoch != x.epoch || e.n == 0 || x.lastOffset < 0 {
			e = &producerEntry{epoch: x.epoch}
			s.producers[x.producerID] = e
		}
		e.lastTimestamp = x.timestamp
		if t := (txnFields{x.coordinatorEpoch, x.txnFirstOffset}); t != noTxn {
			if s.txn == nil {
				s.txn = map[int64]txnFields{}
			}
			s.txn[x.producerID] = t
		} else {
			delete(s.txn, x.producerID)
		}
		if x.lastOffset >= 0 && x.lastSeq >= 0 {
			e.addBatch(x.epoch, BatchMetadata{
				FirstSeq:     decrementSequence(x.lastSeq, x.offsetDelta),
				LastSeq:      x.lastSeq,
				LastOffset:   x.lastOffset,
				OffsetDelta:  x.offsetDelta,
				MaxTimestamp: x.timestamp,
			})
		}
		prev = x.producerID
	}
	// The open transactions, by first offset (Kafka's loadProducerEntry).
	for id, t := range s.txn {
		if t.txnFirstOffset >= 0 {
			s.ongoing = append(s.ongoing, OngoingTxn{ProducerID: id, FirstOffset: t.txnFirstOffset})
		}
	}
	slices.SortFunc(s.ongoing, func(a, b OngoingTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	})
	return s, nil
}

// WriteProducerSnapshot writes the snapshot of s at s.EndOffset() in dir,
// atomically and durably (vfs.WriteFileAtomic: a crash leaves the old file or
// the new, and the name survives), and returns its path.
func WriteProducerSnapshot(fs vfs.FS, dir string, s *ProducerState) (string, error) {
	name := producerSnapshotName(dir, s.EndOffset())
	if err := vfs.WriteFileAtomic(fs, name, encodeProducerSnapshot(s)); err != nil {
		return "", fmt.Errorf("log: write producer snapshot %s: %w", name, err)
	}
	return name, nil
}

// ReadProducerSnapshot reads the snapshot file name (its offset is in the
// name). A damaged file is ErrCorruptSnapshot.
func ReadProducerSnapshot(fs vfs.FS, name string) (*ProducerState, error) {
	offset, ok := parseProducerSnapshotName(filepath.Base(name))
	if !ok {
		return nil, fmt.Errorf("log: %s is not a producer snapshot name", name)
	}
	b, err := vfs.ReadFile(fs, name)
	if err != nil {
		return nil, fmt.Errorf("log: read producer snapshot %s: %w", name, err)
	}
	s, err := decodeProducerSnapshot(b, offset)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// parseProducerSnapshotName returns the offset of a snapshot file name:
// 20 digits and ".snapshot".
func parseProducerSnapshotName(base string) (int64, bool) {
	digits, ok := strings.CutSuffix(base, producerSnapshotExt)
	if !ok || len(digits) != 20 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil
}

// listProducerSnapshots returns the offsets of the snapshot files in dir,
// ascending. Other files (segments, a snapshot's leftover .tmp) are ignored.
func listProducerSnapshots(fs vfs.FS, dir string) ([]int64, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("log: list producer snapshots in %s: %w", dir, err)
	}
	var offs []int64
	for _, n := range names {
		if off, ok := parseProducerSnapshotName(n); ok {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// deleteProducerSnapshotsAbove removes the snapshots at offsets above offset
// (for a log truncated to offset) and syncs dir.
func deleteProducerSnapshotsAbove(fs vfs.FS, dir string, offset int64) error {
	return deleteProducerSnapshots(fs, dir, func(off int64) bool { return off > offset })
}

// deleteProducerSnapshotsBelow removes the snapshots at offsets below offset
// (Kafka's deleteSnapshotsBefore, for retention) and syncs dir.
func deleteProducerSnapshotsBelow(fs vfs.FS, dir string, offset int64) error {
	return deleteProducerSnapshots(fs, dir, func(off int64) bool { return off < offset })
}

func deleteProducerSnapshots(fs vfs.FS, dir string, drop func(int64) bool) error {
	offs, err := listProducerSnapshots(fs, dir)
	if err != nil {
		return err
	}
	removed := false
	for _, off := range offs {
		if !drop(off) {
			continue
		}
		if err := fs.Remove(producerSnapshotName(dir, off)); err != nil && !isNotExist(err) {
			return fmt.Errorf("log: delete producer snapshot: %w", err)
		}
		removed = true
	}
	if removed {
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("log: delete producer snapshots: sync %s: %w", dir, err)
		}
	}
	return nil
}

// loadProducerStateDir returns the state from the newest snapshot in dir at or
// below logEnd, for a log of offsets [logStart, logEnd) (Kafka's
// loadFromSnapshot). It deletes the snapshots above logEnd and the corrupt
// ones it meets, trying older ones. Without a usable snapshot the state is
// empty at logStart. A snapshot below logStart keeps its producers (KIP-360:
// the state outlives the records) and starts at logStart.
//
// The caller then replays the log from the state's EndOffset to logEnd
// (ProducerState.ReplayBatches) and expires the producers silent too long
// (ProducerState.Expire).
func loadProducerStateDir(fs vfs.FS, dir string, logStart, logEnd int64) (*ProducerState, error) {
	if err := deleteProducerSnapshotsAbove(fs, dir, logEnd); err != nil {
		return nil, err
	}
	offs, err := listProducerSnapshots(fs, dir)
	if err != nil {
		return nil, err
	}
	for _, off := range slices.Backward(offs) {
		name := producerSnapshotName(dir, off)
		s, err := ReadProducerSnapshot(fs, name)
		if errors.Is(err, ErrCorruptSnapshot) {
			if err := fs.Remove(name); err != nil && !isNotExist(err) {
				return nil, fmt.Errorf("log: delete corrupt producer snapshot: %w", err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		s.endOffset = max(s.endOffset, logStart)
		return s, nil
	}
	return NewProducerState(logStart), nil
}
