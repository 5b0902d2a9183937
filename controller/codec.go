package controller

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sort"
)

// Byte layout of a Raft log entry (one per proposal, all records of one or
// more decisions):
//
//	format  byte     entryFormat (1)
//	count   uvarint  number of records
//	record* type byte, then the fields in declaration order
//
// Field encodings: int and int64 as zigzag varint, int32 as zigzag varint
// checked to fit, bool as one byte 0/1, string as uvarint length + bytes,
// TopicID as 16 raw bytes, []int as uvarint count + varints,
// map[string]string as uvarint count + (key, value) strings sorted by key.
// A registerBrokerRecord with listeners has its own type
// (typeRegisterBrokerListeners): ID, Epoch, Addr, then a uvarint count ≥ 1
// of (Name, Addr) strings; one without keeps typeRegisterBroker's layout,
// which decodes as it always did.
// PartitionState is Partition, Replicas, ISR, Leader, LeaderEpoch,
// PartitionEpoch. A producerIDsRecord is BrokerID, BrokerEpoch,
// NextProducerID (int64). An unregisterBrokerRecord (type 10) is ID, Epoch.
// The security records (types 64-68) are laid out in security_codec.go.
// A configRecord (type 11) is the resource type byte (2 topic, 4 broker),
// resource name, key and value strings, remove bool (value "" then).
// A partitionReassignRecord (type 20) is TopicID, Partition, Replicas,
// AddingReplicas, RemovingReplicas, Leader, ISR, LeaderEpoch,
// PartitionEpoch; a partitionRecord of a partition being reassigned has
// type 21: PartitionState's fields, then AddingReplicas, RemovingReplicas.
//
// encoding/binary varints rather than encoding/json: an entry of one
// partition change is ~30 bytes instead of ~150, and encode+decode costs a
// few hundred nanoseconds with no reflection, which matters at tens of
// thousands of records per second through the FSM; the layout is small
// enough to write down here and to fuzz.
const entryFormat = 1

// Snapshot layout:
//
//	magic           8 bytes  "STRATAMD"
//	format          byte     snapshotFormat (1)
//	version         uvarint  the image version (Raft index)
//	lastBrokerEpoch varint
//	count           uvarint  number of records
//	record*                  as in entries: the records that rebuild the image
//	                         from empty (brokers in epoch order, then topics
//	                         in name order, each followed by its partitions,
//	                         then a producerIDsRecord if ids were given)
//	crc             4 bytes  CRC-32C (Castagnoli), big-endian, of all bytes before it
const (
	snapshotMagic  = "STRATAMD"
	snapshotFormat = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeEntry appends the entry holding recs to dst.
func encodeEntry(dst []byte, recs []record) []byte {
	dst = append(dst, entryFormat)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, r := range recs {
		dst = appendRecord(dst, r)
	}
	return dst
}

// decodeEntry decodes an entry; it fails with ErrCorrupt on any malformed,
// truncated or trailing byte.
func decodeEntry(b []byte) ([]record, error) {
	d := decoder{b: b}
	if f := d.byte(); d.err == nil && f != entryFormat {
		return nil, fmt.Errorf("%w: entry format %d", ErrCorrupt, f)
	}
	recs := d.records()
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return recs, nil
}

func appendRecord(b []byte, r record) []byte {
	b = append(b, byte(r.recordType()))
	switch r := r.(type) {
	case registerBrokerRecord:
		b = appendInt(b, r.ID)
		b = binary.AppendVarint(b, r.Epoch)
		b = appendString(b, r.Addr)
		if len(r.Listeners) > 0 { // typeRegisterBrokerListeners
			b = binary.AppendUvarint(b, uint64(len(r.Listeners)))
			for _, l := range r.Listeners {
				b = appendString(b, l.Name)
				b = appendString(b, l.Addr)
			}
		}
	case fenceBrokerRecord:
		b = appendInt(b, r.ID)
		b = binary.AppendVarint(b, r.Epoch)
	case unfenceBrokerRecord:
		b = appendInt(b, r.ID)
		b = binary.AppendVarint(b, r.Epoch)
	case topicRecord:
		b = appendString(b, r.Name)
		b = append(b, r.ID[:]...)
		b = appendInt(b, r.MinISR)
		b = appendBool(b, r.Unclean)
		b = appendStringMap(b, r.Configs)
	case partitionRecord:
		b = append(b, r.TopicID[:]...)
		b = appendInt(b, r.State.Partition)
		b = appendInts(b, r.State.Replicas)
		b = appendInts(b, r.State.ISR)
		b = appendInt(b, r.State.Leader)
		b = binary.AppendVarint(b, int64(r.State.LeaderEpoch))
		b = binary.AppendVarint(b, int64(r.State.PartitionEpoch))
		if r.recordType() == typePartitionMoving {
			b = appendInts(b, r.State.AddingReplicas)
			b = appendInts(b, r.State.RemovingReplicas)
		}
	case partitionChangeRecord:
		b = append(b, r.TopicID[:]...)
		b = appendInt(b, r.Partition)
		b = appendInt(b, r.Leader)
		b = appendInts(b, r.ISR)
		b = binary.AppendVarint(b, int64(r.LeaderEpoch))
		b = binary.AppendVarint(b, int64(r.PartitionEpoch))
	case partitionReassignRecord:
		b = appendReassign(b, r)
	case removeTopicRecord:
		b = append(b, r.TopicID[:]...)
	case producerIDsRecord:
		b = appendInt(b, r.BrokerID)
		b = binary.AppendVarint(b, r.BrokerEpoch)
		b = binary.AppendVarint(b, r.NextProducerID)
	case unregisterBrokerRecord:
		b = appendInt(b, r.ID)
		b = binary.AppendVarint(b, r.Epoch)
	case aclRecord, removeACLRecord, scramRecord, removeSCRAMRecord, quotaRecord:
		b = appendSecurityRecord(b, r) // security_codec.go
	case configRecord:
		b = append(b, byte(r.Type))
		b = appendString(b, r.Name)
		b = appendString(b, r.Key)
		b = appendString(b, r.Value)
		b = appendBool(b, r.Remove)
	default:
		panic(fmt.Sprintf("controller: unknown record type %T", r))
	}
	return b
}

func appendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInts(b []byte, v []int) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	for _, x := range v {
		b = appendInt(b, x)
	}
	return b
}

func appendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// decoder reads the layout above; the first error sticks and every later
// read returns zero values.
type decoder struct {
	b       []byte
	err     error
	scratch [binary.MaxVarintLen64]byte
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != len(binary.AppendUvarint(d.scratch[:0], v)) {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || n != len(binary.AppendVarint(d.scratch[:0], v)) {
		d.fail("bad varint") // malformed, or not the shortest encoding
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads an int that must lie in [NoLeader, MaxInt32]: broker IDs,
// partition numbers, leaders, counts.
func (d *decoder) int() int {
	v := d.varint()
	if v < NoLeader || v > math.MaxInt32 {
		d.fail("int %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32 %d out of range", v)
		return 0
	}
	return int32(v)
}

func (d *decoder) bool() bool {
	switch v := d.byte(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bool %d", v)
		return false
	}
}

// count reads a length that must not exceed the bytes left (every element
// takes at least one byte), so a corrupt length cannot force a huge allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("count %d exceeds %d remaining bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) topicID() TopicID {
	var id TopicID
	if d.err != nil {
		return id
	}
	if len(d.b) < len(id) {
		d.fail("truncated topic id")
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[len(id):]
	return id
}

func (d *decoder) ints() []int {
	n := d.count()
	if d.err != nil {
		return nil
	}
	out := make([]int, n)
	for i := range out {
		out[i] = d.int()
	}
	return out
}

func (d *decoder) stringMap() map[string]string {
	n := d.count()
	if d.err != nil || n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k, v := d.string(), d.string()
		if i > 0 && k <= prev {
			d.fail("config keys out of order")
		}
		m[k], prev = v, k
	}
	return m
}

func (d *decoder) records() []record {
	n := d.count()
	if d.err != nil {
		return nil
	}
	recs := make([]record, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		recs = append(recs, d.record())
	}
	if d.err != nil {
		return nil
	}
	return recs
}

func (d *decoder) record() record {
	switch t := recordType(d.byte()); t {
	case typeRegisterBroker:
		return registerBrokerRecord{ID: d.int(), Epoch: d.varint(), Addr: d.string()}
	case typeRegisterBrokerListeners:
		r := registerBrokerRecord{ID: d.int(), Epoch: d.varint(), Addr: d.string()}
		n := d.count()
		if d.err == nil && n == 0 {
			d.fail("a listeners record without listeners")
		}
		for i := 0; i < n && d.err == nil; i++ {
			r.Listeners = append(r.Listeners, Endpoint{Name: d.string(), Addr: d.string()})
		}
		return r
	case typeFenceBroker:
		return fenceBrokerRecord{ID: d.int(), Epoch: d.varint()}
	case typeUnfenceBroker:
		return unfenceBrokerRecord{ID: d.int(), Epoch: d.varint()}
	case typeTopic:
		return topicRecord{Name: d.string(), ID: d.topicID(), MinISR: d.int(), Unclean: d.bool(), Configs: d.stringMap()}
	case typePartition:
		r := partitionRecord{TopicID: d.topicID()}
		r.State = PartitionState{
			Partition: d.int(), Replicas: d.ints(), ISR: d.ints(), Leader: d.int(),
			LeaderEpoch: d.int32(), PartitionEpoch: d.int32(),
		}
		return r
	case typePartitionChange:
		return partitionChangeRecord{
			TopicID: d.topicID(), Partition: d.int(), Leader: d.int(), ISR: d.ints(),
			LeaderEpoch: d.int32(), PartitionEpoch: d.int32(),
		}
	case typePartitionMoving:
		r := partitionRecord{TopicID: d.topicID()}
		r.State = PartitionState{
			Partition: d.int(), Replicas: d.ints(), ISR: d.ints(), Leader: d.int(),
			LeaderEpoch: d.int32(), PartitionEpoch: d.int32(),
			AddingReplicas: nilIfEmpty(d.ints()), RemovingReplicas: nilIfEmpty(d.ints()),
		}
		if d.err == nil && len(r.State.AddingReplicas)+len(r.State.RemovingReplicas) == 0 {
			d.fail("a moving partition record that moves nothing")
		}
		return r
	case typePartitionReassign:
		return d.reassign()
	case typeRemoveTopic:
		return removeTopicRecord{TopicID: d.topicID()}
	case typeProducerIDs:
		return producerIDsRecord{BrokerID: d.int(), BrokerEpoch: d.varint(), NextProducerID: d.varint()}
	case typeUnregisterBroker:
		return unregisterBrokerRecord{ID: d.int(), Epoch: d.varint()}
	case typeACL, typeRemoveACL, typeSCRAM, typeRemoveSCRAM, typeQuota:
		return d.securityRecord(t) // security_codec.go
	case typeConfig:
		r := configRecord{Type: ConfigResourceType(d.byte()), Name: d.string(), Key: d.string(), Value: d.string(), Remove: d.bool()}
		if d.err == nil && (r.Type != TopicConfigs && r.Type != BrokerConfigs || r.Key == "" || r.Remove && r.Value != "") {
			d.fail("config record of %s %q key %q", r.Type, r.Name, r.Key)
		}
		return r
	default:
		d.fail("record type %d", t)
		return nil
	}
}

// imageRecords returns records that rebuild img when applied, in order, to
// an empty image.
func imageRecords(img *Image) []record {
	brokers := img.Brokers()
	slices.SortFunc(brokers, func(a, b BrokerInfo) int {
		switch {
		case a.Epoch < b.Epoch:
			return -1
		case a.Epoch > b.Epoch:
			return 1
		}
		return 0
	})
	var recs []record
	for _, b := range brokers {
		recs = append(recs, registerBrokerRecord{ID: b.ID, Epoch: b.Epoch, Addr: b.Addr, Listeners: b.Listeners})
		if !b.Fenced {
			recs = append(recs, unfenceBrokerRecord{ID: b.ID, Epoch: b.Epoch})
		}
	}
	for _, t := range img.sortedTopics() {
		recs = append(recs, topicRecord{Name: t.name, ID: t.id, MinISR: t.minISR, Unclean: t.unclean, Configs: t.configs})
		for _, p := range t.parts {
			recs = append(recs, partitionRecord{TopicID: t.id, State: p})
		}
	}
	if img.nextProducerID > 0 {
		recs = append(recs, producerIDsRecord{NextProducerID: img.nextProducerID})
	}
	recs = append(recs, securityRecords(img)...)     // ACLs, SCRAM credentials, quotas (security.go)
	recs = append(recs, brokerConfigRecords(img)...) // dynamic broker configs (configs.go)
	return recs
}

// encodeSnapshot appends the snapshot of img to dst.
func encodeSnapshot(dst []byte, img *Image) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = append(dst, snapshotFormat)
	dst = binary.AppendUvarint(dst, img.version)
	dst = binary.AppendVarint(dst, img.lastBrokerEpoch)
	recs := imageRecords(img)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, r := range recs {
		dst = appendRecord(dst, r)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeSnapshot rebuilds the image a snapshot holds.
func decodeSnapshot(b []byte) (*Image, error) {
	if len(b) < len(snapshotMagic)+1+4 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a metadata snapshot", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	d := decoder{b: body[len(snapshotMagic):]}
	if f := d.byte(); d.err == nil && f != snapshotFormat {
		return nil, fmt.Errorf("%w: snapshot format %d", ErrCorrupt, f)
	}
	version := d.uvarint()
	lastEpoch := d.varint()
	recs := d.records()
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes in snapshot", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	img := newImage()
	for _, r := range recs {
		if err := img.apply(r); err != nil {
			return nil, fmt.Errorf("%w: snapshot record: %v", ErrCorrupt, err)
		}
	}
	if lastEpoch < img.lastBrokerEpoch {
		return nil, fmt.Errorf("%w: snapshot broker epoch %d below a broker's %d", ErrCorrupt, lastEpoch, img.lastBrokerEpoch)
	}
	img.lastBrokerEpoch = lastEpoch
	img.version = version
	return img, nil
}
