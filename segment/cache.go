package segment

import "sync"

// Cache bounds the number of sealed segments whose files are open (three
// file descriptors each, and two mappings), across every segment whose
// Config names it: when a sealed segment's files open (a reader needs them,
// or the segment was just sealed) and more than the bound are open, the
// files of sealed segments that no reader holds are closed, least recently
// acquired first (the clock algorithm: a segment acquired since the hand
// last passed gets a second chance). They are opened again by the next
// reader that needs them. Segments held by readers cannot be closed, so the
// bound is exceeded by as many as readers hold at once.
//
// Active segments are not counted: their files stay open.
type Cache struct {
	max  int
	mu   sync.Mutex
	segs []*Segment // sealed segments with open files, in no order
	hand int
}

// NewCache returns a Cache that keeps at most n sealed segments' files
// open (at least 1).
func NewCache(n int) *Cache { return &Cache{max: max(n, 1)} }

// Len returns the number of sealed segments whose files are open.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.segs)
}

// add records that s, sealed, has its files open, and closes those of
// others if that is too many.
func (c *Cache) add(s *Segment) {
	c.mu.Lock()
	if s.cacheIdx < 0 {
		s.cacheIdx = len(c.segs)
		c.segs = append(c.segs, s)
	}
	victims := c.victimsLocked()
	c.mu.Unlock()
	// Outside mu: a segment holds its fmu while it calls add or remove.
	for _, v := range victims {
		v.evict() // removes it from segs; a failure leaves it there
	}
}

// victimsLocked picks the segments to close to get back to the bound: the
// clock hand sweeps the list at most twice, clearing the used bits it
// passes and taking segments whose bit was clear and that no one holds.
func (c *Cache) victimsLocked() []*Segment {
	over := len(c.segs) - c.max
	if over <= 0 {
		return nil
	}
	var victims []*Segment
	for range 2 * len(c.segs) {
		if len(victims) == over {
			break
		}
		if c.hand >= len(c.segs) {
			c.hand = 0
		}
		s := c.segs[c.hand]
		c.hand++
		if s.used.Swap(false) || s.refs.Load() != ownerRef {
			continue
		}
		victims = append(victims, s)
	}
	return victims
}

// remove takes s out of the list: its files were closed.
func (c *Cache) remove(s *Segment) {
	c.mu.Lock()
	if i := s.cacheIdx; i >= 0 {
		last := len(c.segs) - 1
		c.segs[i] = c.segs[last]
		c.segs[i].cacheIdx = i
		c.segs[last] = nil
		c.segs = c.segs[:last]
		s.cacheIdx = -1
	}
	c.mu.Unlock()
}
