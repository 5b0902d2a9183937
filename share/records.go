package share

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/errs"
)

// The records of __share_group_state, as Kafka's share coordinator writes
// them. A key is its record type as an int16 version, then the group id
// (an int16-length string), the topic id (16 bytes) and the partition
// (int32): not flexible. A value is an int16 version, 0, then its fields
// in Kafka's flexible encoding: integers big-endian, arrays with an
// unsigned varint length plus one, a tagged-field section (an unsigned
// varint count, then tag, size and bytes) after every struct.
//
//	0  ShareSnapshot  snapshot epoch int32, state epoch int32, leader epoch int32,
//	                  start offset int64, create time ms int64, write time ms int64,
//	                  [first offset int64, last offset int64, state int8, delivery count int16]
//	1  ShareUpdate    snapshot epoch int32, leader epoch int32, start offset int64,
//	                  [first offset int64, last offset int64, state int8, delivery count int16]
//
// A snapshot is the whole state of a share-partition; an update the state
// batches that changed since, and the start offset. Replay applies the
// latest snapshot of each share-partition, then the updates after it, in
// order. The tagged field Kafka 4.2 added (DeliveryCompleteCount, tag 0)
// is skipped when read and not written. A null value is a tombstone: the
// share-partition's state is deleted.

// Record types of __share_group_state.
const (
	recSnapshot = 0
	recUpdate   = 1
)

// ErrCorrupt: a record of __share_group_state that does not decode.
var ErrCorrupt = errs.Mark("share: corrupt share group state record", errs.ErrCorrupt)

// errNotShareRecord: a key of another record type.
var errNotShareRecord = errors.New("share: not a share state record")

// stateKey identifies a share-partition in the records.
type stateKey struct {
	group     string
	topicID   [16]byte
	partition int32
}

// stateValue is a snapshot's or an update's value.
type stateValue struct {
	snapshotEpoch int32
	stateEpoch    int32 // snapshots only
	leaderEpoch   int32
	start         int64 // -1 in an update: unchanged
	createMs      int64 // snapshots only
	writeMs       int64 // snapshots only
	batches       []StateBatch
}

func encodeKey(kind int16, k stateKey) []byte {
	b := make([]byte, 0, 2+2+len(k.group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(kind))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.group)))
	b = append(b, k.group...)
	b = append(b, k.topicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.partition))
}

func encodeValue(kind int16, v stateValue) []byte {
	b := make([]byte, 0, 64+19*len(v.batches))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(v.snapshotEpoch))
	if kind == recSnapshot {
		b = binary.BigEndian.AppendUint32(b, uint32(v.stateEpoch))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(v.leaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.start))
	if kind == recSnapshot {
		b = binary.BigEndian.AppendUint64(b, uint64(v.createMs))
		b = binary.BigEndian.AppendUint64(b, uint64(v.writeMs))
	}
	b = binary.AppendUvarint(b, uint64(len(v.batches))+1)
	for _, sb := range v.batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.State))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
		b = append(b, 0) // no tagged fields
	}
	return append(b, 0)
}

// decodeKey decodes a key: errNotShareRecord for another record type,
// ErrCorrupt for bytes that do not decode.
func decodeKey(b []byte) (kind int16, k stateKey, err error) {
	if len(b) < 2 {
		return 0, k, fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(b))
	}
	kind = int16(binary.BigEndian.Uint16(b))
	if kind != recSnapshot && kind != recUpdate {
		return kind, k, fmt.Errorf("%w: type %d", errNotShareRecord, kind)
	}
	b = b[2:]
	if len(b) < 2 {
		return 0, k, fmt.Errorf("%w: key truncated", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != n+16+4 {
		return 0, k, fmt.Errorf("%w: key of %d bytes after a group id of %d", ErrCorrupt, len(b), n)
	}
	k.group = string(b[:n])
	copy(k.topicID[:], b[n:n+16])
	k.partition = int32(binary.BigEndian.Uint32(b[n+16:]))
	if k.partition < 0 {
		return 0, k, fmt.Errorf("%w: partition %d", ErrCorrupt, k.partition)
	}
	return kind, k, nil
}

// decodeValue decodes a value of a record of kind.
func decodeValue(kind int16, b []byte) (stateValue, error) {
	d := decoder{b: b, ok: true}
	var v stateValue
	if ver := d.u16(); ver != 0 && d.ok {
		return v, fmt.Errorf("%w: value version %d", ErrCorrupt, ver)
	}
	v.snapshotEpoch = int32(d.u32())
	if kind == recSnapshot {
		v.stateEpoch = int32(d.u32())
	}
	v.leaderEpoch = int32(d.u32())
	v.start = int64(d.u64())
	if kind == recSnapshot {
		v.createMs = int64(d.u64())
		v.writeMs = int64(d.u64())
	}
	n := d.uvarint()
	if n == 0 || n-1 > uint64(len(d.b))/20 {
		return v, fmt.Errorf("%w: %d state batches in %d bytes", ErrCorrupt, int64(n)-1, len(d.b))
	}
	v.batches = make([]StateBatch, 0, n-1)
	prev := int64(-1)
	for range n - 1 {
		sb := StateBatch{First: int64(d.u64()), Last: int64(d.u64()), State: RecordState(d.u8()), DeliveryCount: int16(d.u16())}
		d.tags()
		if !d.ok {
			break
		}
		if sb.First < 0 || sb.Last < sb.First || sb.First <= prev || sb.DeliveryCount < 0 ||
			(sb.State != Available && sb.State != Acquired && sb.State != Acknowledged && sb.State != Archived) {
			return v, fmt.Errorf("%w: state batch %+v", ErrCorrupt, sb)
		}
		prev = sb.Last
		v.batches = append(v.batches, sb)
	}
	d.tags()
	if !d.ok || len(d.b) != 0 {
		return v, fmt.Errorf("%w: value of %d bytes", ErrCorrupt, len(b))
	}
	if v.start < -1 || (kind == recSnapshot && v.start < 0) {
		return v, fmt.Errorf("%w: start offset %d", ErrCorrupt, v.start)
	}
	return v, nil
}

type decoder struct {
	b  []byte
	ok bool
}

func (d *decoder) take(n int) []byte {
	if !d.ok || len(d.b) < n {
		d.ok, d.b = false, nil
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.BigEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if !d.ok || n <= 0 {
		d.ok, d.b = false, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// tags skips a tagged-field section.
func (d *decoder) tags() {
	n := d.uvarint()
	for range n {
		if !d.ok {
			return
		}
		d.uvarint() // tag
		size := d.uvarint()
		if size > uint64(len(d.b)) {
			d.ok, d.b = false, nil
			return
		}
		d.take(int(size))
	}
}
