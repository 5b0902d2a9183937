package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-log/strata/group/assign"
)

// The bytes of a consumer group's records in __consumer_offsets, as Kafka
// 4 writes them. A key is its record type as an int16 version, then the
// group id and, for the member records, the member id (for the regex
// record, the expression): strings with an int16 length, not flexible. A
// value is an int16 version, 0, then its fields in Kafka's flexible
// encoding: strings and arrays with an unsigned varint length plus one
// (0: null), topic ids as 16 bytes, integers big-endian, and a tagged
// field section (an unsigned varint count, then tag, size and bytes) after
// every struct. A null value is a tombstone.
//
//	3  ConsumerGroupMetadata             epoch int32
//	4  ConsumerGroupPartitionMetadata    [topic id, name, partitions int32, [partition int32, [rack]]]
//	5  ConsumerGroupMemberMetadata       instance id?, rack?, client id, client host, [topic],
//	                                     regex?, rebalance timeout ms int32, server assignor?
//	6  ConsumerGroupTargetAssignmentMetadata  assignment epoch int32
//	7  ConsumerGroupTargetAssignmentMember    [topic id, [partition int32]]
//	8  ConsumerGroupCurrentMemberAssignment   epoch int32, previous epoch int32, state int8,
//	                                          assigned [topic id, [partition]], revoking [topic id, [partition]]
//	16 ConsumerGroupRegularExpression    [topic], version int64, timestamp ms int64
//
// Tagged fields Kafka added later (the metadata hash, assignment epochs of
// partitions, the classic member metadata) are skipped when read and not
// written.

// topicIDs maps the topic names of the machine to the ids the records
// carry, and back.
type topicIDs interface {
	ID(name string) [16]byte
	Name(id [16]byte) (string, bool)
}

// errNotConsumerRecord: the key is not one of a consumer group's records.
var errNotConsumerRecord = errors.New("group: not a consumer group record")

const consumerValueVersion = 0

// encodeConsumerRecord returns the key and value (nil for a tombstone) of
// r, a record of group.
func encodeConsumerRecord(group string, r cgRec, ids topicIDs) (key, value []byte) {
	key = binary.BigEndian.AppendUint16(nil, uint16(r.kind))
	key = appendString16(key, group)
	switch r.kind {
	case recMember, recTargetMember, recCurrent:
		key = appendString16(key, r.member)
	case recRegex:
		key = appendString16(key, r.regex)
	}
	if r.tombstone {
		return key, nil
	}
	w := binary.BigEndian.AppendUint16(nil, consumerValueVersion)
	switch r.kind {
	case recGroupEpoch, recTargetMeta:
		w = binary.BigEndian.AppendUint32(w, uint32(r.epoch))
	case recPartitionMeta:
		names := slices.Sorted(maps.Keys(r.topics))
		w = appendLen(w, len(names))
		for _, t := range names {
			md := r.topics[t]
			id := ids.ID(t)
			w = append(w, id[:]...)
			w = appendCompact(w, t)
			w = binary.BigEndian.AppendUint32(w, uint32(md.Partitions))
			w = appendLen(w, len(md.Racks))
			for p, racks := range md.Racks {
				w = binary.BigEndian.AppendUint32(w, uint32(p))
				w = appendLen(w, len(racks))
				for _, rack := range racks {
					w = appendCompact(w, rack)
				}
				w = append(w, 0) // tags
			}
			w = append(w, 0)
		}
	case recMember:
		s := r.sub
		w = appendNullable(w, s.instanceID)
		w = appendNullable(w, s.rack)
		w = appendCompact(w, s.clientID)
		w = appendCompact(w, s.clientHost)
		w = appendLen(w, len(s.topics))
		for _, t := range s.topics {
			w = appendCompact(w, t)
		}
		w = appendNullable(w, s.regex)
		ms := int32(-1)
		if s.rebalanceTimeout >= 0 {
			ms = int32(s.rebalanceTimeout / time.Millisecond)
		}
		w = binary.BigEndian.AppendUint32(w, uint32(ms))
		w = appendNullable(w, s.assignor)
	case recTargetMember:
		w = appendTopicPartitions(w, r.partitions, ids)
	case recCurrent:
		c := r.current
		w = binary.BigEndian.AppendUint32(w, uint32(c.epoch))
		w = binary.BigEndian.AppendUint32(w, uint32(c.prevEpoch))
		w = append(w, byte(c.state))
		w = appendTopicPartitions(w, c.assigned, ids)
		w = appendTopicPartitions(w, c.revoking, ids)
	case recRegex:
		w = appendLen(w, len(r.regexTopics))
		for _, t := range r.regexTopics {
			w = appendCompact(w, t)
		}
		w = binary.BigEndian.AppendUint64(w, uint64(r.version))
		w = binary.BigEndian.AppendUint64(w, uint64(r.at.UnixMilli()))
	default:
		panic(fmt.Sprintf("group: encode consumer record of kind %d", r.kind))
	}
	return key, append(w, 0) // no tagged fields
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendLen(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)+1) }

func appendCompact(b []byte, s string) []byte { return append(appendLen(b, len(s)), s...) }

// appendNullable writes "" as null.
func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	return appendCompact(b, s)
}

func appendTopicPartitions(b []byte, ps assign.Partitions, ids topicIDs) []byte {
	var topics []string
	for t, parts := range ps {
		if len(parts) > 0 {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	b = appendLen(b, len(topics))
	for _, t := range topics {
		id := ids.ID(t)
		b = append(b, id[:]...)
		b = appendLen(b, len(ps[t]))
		for _, p := range ps[t] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		b = append(b, 0)
	}
	return b
}

// decodeConsumerRecord decodes a record of __consumer_offsets that is one
// of a consumer group's (errNotConsumerRecord otherwise). A topic id that
// names resolves to no topic is ErrCorruptOffsetRecord; so is anything
// malformed: short or trailing bytes, a value version other than 0, a
// negative count, partition or rebalance timeout below -1.
func decodeConsumerRecord(key, value []byte, names func([16]byte) (string, bool)) (group string, r cgRec, err error) {
	k := &reader{b: key}
	kind := recKind(k.u16())
	switch kind {
	case recGroupEpoch, recPartitionMeta, recMember, recTargetMeta, recTargetMember, recCurrent, recRegex:
	default:
		if k.err != nil {
			return "", cgRec{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptOffsetRecord, len(key))
		}
		return "", cgRec{}, fmt.Errorf("%w: key version %d", errNotConsumerRecord, int16(kind))
	}
	r.kind = kind
	group = k.string16()
	switch kind {
	case recMember, recTargetMember, recCurrent:
		r.member = k.string16()
		if r.member == "" && k.err == nil {
			k.fail("empty member id")
		}
	case recRegex:
		r.regex = k.string16()
	}
	if k.err == nil && len(k.b) > 0 {
		k.fail("trailing bytes")
	}
	if k.err == nil && (group == "" || len(group) > MaxNameLen) {
		k.fail(fmt.Sprintf("group id %q", group))
	}
	if k.err != nil {
		return "", cgRec{}, fmt.Errorf("%w: key of record type %d: %v", ErrCorruptOffsetRecord, kind, k.err)
	}
	if value == nil {
		r.tombstone = true
		return group, r, nil
	}
	v := &reader{b: value, names: names}
	if ver := v.u16(); v.err == nil && ver != consumerValueVersion {
		v.fail(fmt.Sprintf("value version %d", int16(ver)))
	}
	switch kind {
	case recGroupEpoch, recTargetMeta:
		r.epoch = int32(v.u32())
	case recPartitionMeta:
		r.topics = map[string]assign.Topic{}
		r.ids = map[[16]byte]string{}
		for range v.count() {
			id := v.uuid()
			name := v.compact()
			r.ids[id] = name
			md := assign.Topic{Partitions: int(v.i32nonneg())}
			n := v.count()
			for range n {
				p := int(v.i32nonneg())
				var racks []string
				for range v.count() {
					racks = append(racks, v.compact())
				}
				v.tags()
				if v.err == nil && p >= md.Partitions {
					v.fail(fmt.Sprintf("racks of partition %d of %d", p, md.Partitions))
				}
				// Racks is indexed by partition, as long as the entries:
				// what the record holds bounds what it allocates. (Kafka
				// writes one entry per partition, in order.)
				if v.err == nil && p < n {
					if md.Racks == nil {
						md.Racks = make([][]string, n)
					}
					md.Racks[p] = racks
				}
			}
			v.tags()
			if v.err == nil && name == "" {
				v.fail("empty topic name")
			}
			r.topics[name] = md
		}
	case recMember:
		s := &subscription{}
		s.instanceID = v.nullable()
		s.rack = v.nullable()
		s.clientID = v.compact()
		s.clientHost = v.compact()
		for range v.count() {
			s.topics = append(s.topics, v.compact())
		}
		if s.topics == nil {
			s.topics = []string{}
		}
		s.regex = v.nullable()
		ms := int32(v.u32())
		if ms < -1 {
			v.fail(fmt.Sprintf("rebalance timeout %d ms", ms))
		}
		s.rebalanceTimeout = time.Duration(ms) * time.Millisecond
		if ms < 0 {
			s.rebalanceTimeout = -1
		}
		s.assignor = v.nullable()
		r.sub = s
	case recTargetMember:
		r.partitions = v.topicPartitions()
	case recCurrent:
		c := &currentAssignment{}
		c.epoch = int32(v.u32())
		c.prevEpoch = int32(v.u32())
		c.state = memberState(v.u8())
		switch c.state {
		case memberStable, memberUnrevoked, memberUnreleased:
		default:
			c.state = memberUnknown // a newer coordinator's: Kafka's UNKNOWN
		}
		c.assigned = v.topicPartitions()
		c.revoking = v.topicPartitions()
		r.current = c
	case recRegex:
		for range v.count() {
			r.regexTopics = append(r.regexTopics, v.compact())
		}
		r.version = int64(v.u64())
		r.at = time.UnixMilli(int64(v.u64())).UTC()
	}
	v.tags()
	if v.err == nil && len(v.b) > 0 {
		v.fail("trailing bytes")
	}
	if v.err != nil {
		return "", cgRec{}, fmt.Errorf("%w: value of record type %d of group %q: %v", ErrCorruptOffsetRecord, kind, group, v.err)
	}
	return group, r, nil
}

// reader reads the fields of a record; the first error sticks and makes
// every later read return zero.
type reader struct {
	b     []byte
	err   error
	names func([16]byte) (string, bool)
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
	r.b = nil
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail("short")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) i32nonneg() int32 {
	n := int32(r.u32())
	if n < 0 {
		r.fail(fmt.Sprintf("negative %d", n))
		return 0
	}
	return n
}

func (r *reader) uuid() (id [16]byte) {
	copy(id[:], r.take(16))
	return id
}

func (r *reader) string16() string {
	n := int16(r.u16())
	if n < 0 {
		r.fail("null string")
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a compact array's length; a null array is empty. It never
// exceeds the bytes left, so a corrupt length cannot make a caller loop
// or allocate past the record.
func (r *reader) count() int {
	n := int(r.uvarint()) - 1
	if n < 0 {
		return 0
	}
	if n > len(r.b) {
		r.fail(fmt.Sprintf("array of %d in %d bytes", n, len(r.b)))
		return 0
	}
	return n
}

func (r *reader) nullable() string {
	n := int(r.uvarint()) - 1
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

func (r *reader) compact() string {
	n := int(r.uvarint()) - 1
	if n < 0 {
		r.fail("null string")
		return ""
	}
	return string(r.take(n))
}

// tags skips a tagged field section.
func (r *reader) tags() {
	for range r.count() {
		r.uvarint()
		r.take(int(r.uvarint()))
	}
}

func (r *reader) topicPartitions() assign.Partitions {
	out := assign.Partitions{}
	for range r.count() {
		id := r.uuid()
		name, ok := r.names(id)
		if r.err == nil && !ok {
			r.fail(fmt.Sprintf("unknown topic id %x", id))
		}
		var ps []int
		for range r.count() {
			ps = append(ps, int(r.i32nonneg()))
		}
		r.tags()
		if r.err != nil {
			return nil
		}
		merged := append(out[name], ps...)
		slices.Sort(merged)
		out[name] = slices.Compact(merged)
	}
	return out
}
