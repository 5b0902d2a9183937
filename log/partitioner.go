package log

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Partitioner says how a Producer picks the partition of a record.
type Partitioner int

const (
	// PartitionerDefault is the Java client's default partitioner. A record
	// with a key (non-nil, even empty) goes to KeyPartition(key, n), so a key
	// lands on the same partition number as with Kafka's own clients. A
	// record with a nil key is sticky: it goes to the partition the
	// previous nil-key records of its topic went to, until that
	// partition's batch is closed (full, lingered, flushed); then a new
	// partition is picked at random, never the same one twice in a row when
	// there are two or more (KIP-480). Record.Partition is ignored.
	PartitionerDefault Partitioner = iota
	// PartitionerManual sends each record to Record.Partition (0 is a
	// valid partition). A partition outside the topic is ErrUnknownPartition.
	PartitionerManual
	// PartitionerRoundRobin sends successive records of a topic to
	// successive partitions, keys or not (Kafka's RoundRobinPartitioner).
	PartitionerRoundRobin
)

func (p Partitioner) String() string {
	switch p {
	case PartitionerDefault:
		return "default"
	case PartitionerManual:
		return "manual"
	case PartitionerRoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Partitioner(%d)", int(p))
}

// partitionLocked chooses r's partition.
func (p *Producer) partitionLocked(t *topicState, r *Record) (int, error) {
	switch p.cfg.Partitioner {
	case PartitionerManual:
		if r.Partition < 0 || r.Partition >= t.n {
			return 0, fmt.Errorf("%w: produce to %s: it has %d partitions, not %d", ErrUnknownPartition, t.name, t.n, r.Partition)
		}
		return r.Partition, nil
	case PartitionerRoundRobin:
		i := int(t.rr % uint(t.n))
		t.rr++
		return i, nil
	}
	if r.Key != nil {
		return KeyPartition(r.Key, t.n), nil
	}
	if t.sticky < 0 {
		t.sticky = nextSticky(-1, t.n)
	}
	return t.sticky, nil
}

// KeyPartition returns the partition, among n > 0, that Kafka's default
// partitioner gives to a record with this key:
// toPositive(murmur2(key)) % n, with Kafka's seed 0x9747b28c
// (org.apache.kafka.common.utils.Utils.murmur2 and
// BuiltInPartitioner.partitionForKey).
func KeyPartition(key []byte, n int) int {
	return int(murmur2(key)&0x7fffffff) % n
}

// murmur2 is MurmurHash2, 32-bit, as Kafka's Utils.murmur2 computes it:
// little-endian 4-byte blocks, seed 0x9747b28c, and the tail mixed in
// before the final avalanche. Java's int arithmetic wraps like uint32, and
// its >>> is Go's >> on a uint32, so the bits are the same.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h = h*m ^ k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// nextSticky picks the sticky partition that follows prev (-1: none yet)
// among n: at random, and not prev when there is a choice.
func nextSticky(prev, n int) int {
	if n <= 1 {
		return 0
	}
	if prev < 0 || prev >= n {
		return rand.IntN(n)
	}
	p := rand.IntN(n - 1)
	if p >= prev {
		p++
	}
	return p
}
