package log

import (
	"hash/maphash"
)

// offsetMap is the log cleaner's map of key → latest offset in bounded
// memory, as Kafka's SkimpyOffsetMap: keys are not stored, only a 128-bit
// hash of each (two independent 64-bit hashes), so an entry is 24 bytes and
// a map of n bytes holds n/24 slots, filled to 90% at most (Kafka's
// dedupe load factor). Two keys with the same 128-bit hash would be taken for
// one; with a few hundred million keys the odds of one such pair are about
// 1 in 10^20.
//
// Open addressing with linear probing in a power-of-two table; an offset of
// 0 in a slot means empty (offsets are stored plus one).
type offsetMap struct {
	max    int64 // bytes the slots may grow to
	slots  []mapSlot
	mask   uint64
	n      int // keys held
	limit  int // keys it may hold
	s1, s2 maphash.Seed
}

type mapSlot struct {
	h1, h2 uint64
	off    int64 // offset + 1; 0: empty
}

const (
	mapSlotBytes  = 24
	mapLoadFactor = 0.9
)

// newOffsetMap returns a map sized for want keys that grows, doubling, as
// keys come, up to maxBytes.
func newOffsetMap(maxBytes int64, want int) *offsetMap {
	slots := int64(2)
	for slots*2*mapSlotBytes <= maxBytes && float64(slots)*mapLoadFactor < float64(want) {
		slots *= 2
	}
	m := &offsetMap{max: maxBytes, s1: maphash.MakeSeed(), s2: maphash.MakeSeed()}
	m.alloc(slots)
	return m
}

func (m *offsetMap) alloc(slots int64) {
	m.slots = make([]mapSlot, slots)
	m.mask = uint64(slots - 1)
	m.limit = min(int(float64(slots)*mapLoadFactor), int(slots)-1) // an empty slot ends probes
	m.n = 0
}

// grow doubles the table if maxBytes allows; false if it does not.
func (m *offsetMap) grow() bool {
	if int64(len(m.slots))*2*mapSlotBytes > m.max {
		return false
	}
	old := m.slots
	m.alloc(int64(len(old)) * 2)
	for _, s := range old {
		if s.off == 0 {
			continue
		}
		for i := s.h1 & m.mask; ; i = (i + 1) & m.mask {
			if m.slots[i].off == 0 {
				m.slots[i] = s
				m.n++
				break
			}
		}
	}
	return true
}

// reset empties the map, keeping its table, with new seeds.
func (m *offsetMap) reset() {
	clear(m.slots)
	m.n = 0
	m.s1, m.s2 = maphash.MakeSeed(), maphash.MakeSeed()
}

// bytes is the memory the slots take.
func (m *offsetMap) bytes() int64 { return int64(len(m.slots)) * mapSlotBytes }

// put records offset as the latest of key. It returns false, changing
// nothing, when key is new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := maphash.Bytes(m.s1, key), maphash.Bytes(m.s2, key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			if m.n >= m.limit {
				if !m.grow() {
					return false
				}
				return m.put(key, offset)
			}
			*s = mapSlot{h1: h1, h2: h2, off: offset + 1}
			m.n++
			return true
		}
		if s.h1 == h1 && s.h2 == h2 {
			s.off = offset + 1
			return true
		}
	}
}

// get returns the latest offset of key, or -1 if key is not in the map.
func (m *offsetMap) get(key []byte) int64 {
	h1, h2 := maphash.Bytes(m.s1, key), maphash.Bytes(m.s2, key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			return -1
		}
		if s.h1 == h1 && s.h2 == h2 {
			return s.off - 1
		}
	}
}
