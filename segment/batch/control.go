package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Control batches: attribute bit 5 set, one control record whose key names
// its type. The transaction markers (COMMIT, ABORT) a transaction
// coordinator has each partition leader append are such batches, also
// transactional (bit 4), with the producer id and epoch of the transaction
// they end and no base sequence:
//
//	key    version int16 (0), type int16 (0 ABORT, 1 COMMIT; 2-6 are KRaft's)
//	value  version int16 (0), coordinatorEpoch int32
//
// The record has offset delta 0, timestamp delta 0 and no headers, so a
// marker batch is always MarkerSize (78) bytes. Kafka reads a key or value
// of a newer version as version 0 (the fields only ever grow), and refuses a
// negative version or one shorter than version 0's fields.

// ControlType is the type of a control record, read from its key (Kafka's
// ControlRecordType).
type ControlType int16

// Control record types. Kafka's Raft (KRaft) writes types 2 to 6 in its
// metadata log; consumers skip every control record whatever its type.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case ControlLeaderChange:
		return "LEADER_CHANGE"
	case ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	case ControlKRaftVersion:
		return "KRAFT_VERSION"
	case ControlKRaftVoters:
		return "KRAFT_VOTERS"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

const (
	controlKeySize   = 4 // version, type
	markerValueSize  = 6 // version, coordinator epoch
	markerRecordBody = 1 + 1 + 1 + 1 + controlKeySize + 1 + markerValueSize + 1
	// MarkerSize is the size of a transaction marker batch.
	MarkerSize = HeaderSize + 1 + markerRecordBody
)

// ErrNotMarker is returned by ParseMarker for a batch that is not a
// transaction marker: not a control batch, or a control batch of another
// type (a KRaft record, a type this package does not know).
var ErrNotMarker = errors.New("batch: not a transaction marker")

// Marker is a transaction marker: the end of one producer's transaction in
// one partition, committed or aborted.
type Marker struct {
	Commit           bool  // COMMIT; false: ABORT
	CoordinatorEpoch int32 // the epoch of the coordinator that wrote it
	ProducerID       int64
	ProducerEpoch    int16
	Timestamp        int64 // ms; the batch's base and max timestamp
}

// Type is ControlCommit or ControlAbort.
func (m Marker) Type() ControlType {
	if m.Commit {
		return ControlCommit
	}
	return ControlAbort
}

// AppendMarker appends to dst the control batch of marker m, as Kafka writes
// it: attributes transactional and control (0x30, uncompressed, CreateTime),
// base offset 0 and partition leader epoch -1 (the appending broker sets both
// with SetBaseOffset and SetPartitionLeaderEpoch, which leave the CRC valid),
// base sequence -1, one record.
func AppendMarker(dst []byte, m Marker) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, MarkerSize)...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint32(b[offLength:], MarkerSize-logOverhead)
	be.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1
	b[offMagic] = Magic
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint64(b[offBaseTimestamp:], uint64(m.Timestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(m.Timestamp))
	be.PutUint64(b[offProducerID:], uint64(m.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(m.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], math.MaxUint32) // -1
	be.PutUint32(b[offNumRecords:], 1)
	r := b[HeaderSize:HeaderSize]
	r = binary.AppendVarint(r, markerRecordBody)
	r = append(r, 0)                            // attributes
	r = binary.AppendVarint(r, 0)               // timestamp delta
	r = binary.AppendVarint(r, 0)               // offset delta
	r = binary.AppendVarint(r, controlKeySize)  // key length
	r = be.AppendUint16(r, 0)                   // key version
	r = be.AppendUint16(r, uint16(m.Type()))    // type
	r = binary.AppendVarint(r, markerValueSize) // value length
	r = be.AppendUint16(r, 0)                   // value version
	r = be.AppendUint32(r, uint32(m.CoordinatorEpoch))
	r = binary.AppendVarint(r, 0) // header count
	if len(r) != MarkerSize-HeaderSize {
		panic("batch: marker record size")
	}
	SetCRC(b)
	return dst
}

// ParseControlKey returns the type named by the key of a control record. A
// key shorter than 4 bytes or with a negative version is ErrCorrupt; a type
// this package does not know is returned as it is (consumers skip it).
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < controlKeySize {
		return 0, corruptf("control record key of %d bytes, need %d", len(key), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, corruptf("control record key version %d", v)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseMarker checks the batch at the start of b (as Decode does) and
// returns the transaction marker it holds. A batch that is not a control
// batch, or a control batch of a type other than COMMIT or ABORT, is
// ErrNotMarker. A marker batch without exactly one record, or whose key or
// value is malformed, is ErrCorrupt.
func ParseMarker(b []byte) (Marker, Header, error) {
	h, err := Validate(b)
	if err != nil {
		return Marker{}, h, err
	}
	if !h.Control() {
		return Marker{}, h, fmt.Errorf("%w: attributes %#x have no control bit", ErrNotMarker, h.Attributes)
	}
	if h.NumRecords != 1 {
		return Marker{}, h, corruptf("control batch of %d records, want 1", h.NumRecords)
	}
	var m Marker
	err = Records(b, h, func(r *Record) error {
		t, err := ParseControlKey(r.Key)
		if err != nil {
			return err
		}
		if t != ControlCommit && t != ControlAbort {
			return fmt.Errorf("%w: control record type %v", ErrNotMarker, t)
		}
		if len(r.Value) < markerValueSize {
			return corruptf("transaction marker value of %d bytes, need %d", len(r.Value), markerValueSize)
		}
		if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
			return corruptf("transaction marker value version %d", v)
		}
		m = Marker{
			Commit:           t == ControlCommit,
			CoordinatorEpoch: int32(binary.BigEndian.Uint32(r.Value[2:])),
			ProducerID:       h.ProducerID,
			ProducerEpoch:    h.ProducerEpoch,
			Timestamp:        r.Timestamp,
		}
		return nil
	})
	if err != nil {
		return Marker{}, h, err
	}
	return m, h, nil
}
