package main

import (
	"fmt"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
)

// indexCheck checks a segment's index entries against its .log in one pass
// over the batches, as they are read: the entries are sorted by position
// (offset index) and offset (time index), so each batch is compared with the
// entries that point at it, and nothing per batch is kept.
//
// An offset-index entry (offset, position) must point at the start of a
// batch that holds offset; segments write the batch's last offset. A
// time-index entry (timestamp, offset) must name the last offset of a batch
// whose max timestamp is timestamp, and that timestamp must be the largest
// in the log up to there (package segment adds an entry when a batch raises
// the segment's largest timestamp).
type indexCheck struct {
	base      int64
	oi        []index.OffsetEntry
	ti        []index.TimeEntry
	oiBad     map[int]bool // entries already reported out of order: not matched
	tiBad     map[int]bool
	oiNext    int
	tiNext    int
	maxTs     int64
	oiReport  func(format string, args ...any) // problems of the offset index
	tiReport  func(format string, args ...any) // problems of the time index
	lastBatch batch.Header
	haveBatch bool
}

// newIndexCheck returns a check of the entries of oi and ti (either may be
// nil: not checked) against the batches of the segment at base.
func newIndexCheck(base int64, oi, ti *indexFile, oiReport, tiReport func(string, ...any)) *indexCheck {
	c := &indexCheck{base: base, maxTs: -1, oiReport: oiReport, tiReport: tiReport,
		oiBad: map[int]bool{}, tiBad: map[int]bool{}}
	if oi != nil {
		c.oi = oi.offsets[:len(oi.offsets)-oi.zeroTail]
		c.checkOffsetOrder()
	}
	if ti != nil {
		c.ti = ti.times[:len(ti.times)-ti.zeroTail]
		c.checkTimeOrder()
	}
	return c
}

// checkOffsetOrder reports offset-index entries that break the order: offsets
// strictly increasing from the base offset, positions non-decreasing.
func (c *indexCheck) checkOffsetOrder() {
	prevOff, prevPos := c.base-1, int64(0)
	for i, e := range c.oi {
		switch {
		case e.Offset < c.base:
			c.oiReport("entry %d (offset %d, position %d): offset below the segment's base offset %d", i, e.Offset, e.Position, c.base)
		case e.Offset <= prevOff:
			c.oiReport("entry %d (offset %d, position %d): offset not above the previous entry's %d", i, e.Offset, e.Position, prevOff)
		case e.Position < prevPos:
			c.oiReport("entry %d (offset %d, position %d): position below the previous entry's %d", i, e.Offset, e.Position, prevPos)
		default:
			prevOff, prevPos = e.Offset, e.Position
			continue
		}
		c.oiBad[i] = true
	}
}

// checkTimeOrder reports time-index entries that break the order: timestamps
// strictly increasing, offsets non-decreasing and not below the base offset.
func (c *indexCheck) checkTimeOrder() {
	prevTs, prevOff := int64(-1), c.base
	for i, e := range c.ti {
		switch {
		case e.Offset < c.base:
			c.tiReport("entry %d (timestamp %d, offset %d): offset below the segment's base offset %d", i, e.Timestamp, e.Offset, c.base)
		case e.Timestamp <= prevTs:
			c.tiReport("entry %d (timestamp %d, offset %d): timestamp not above the previous entry's %d", i, e.Timestamp, e.Offset, prevTs)
		case e.Offset < prevOff:
			c.tiReport("entry %d (timestamp %d, offset %d): offset below the previous entry's %d", i, e.Timestamp, e.Offset, prevOff)
		default:
			prevTs, prevOff = e.Timestamp, e.Offset
			continue
		}
		c.tiBad[i] = true
	}
}

// batch compares the batch at pos with the entries that point at it.
func (c *indexCheck) batch(pos int64, h batch.Header) {
	for ; c.oiNext < len(c.oi) && c.oi[c.oiNext].Position <= pos; c.oiNext++ {
		i, e := c.oiNext, c.oi[c.oiNext]
		switch {
		case c.oiBad[i]:
		case e.Position < pos:
			c.oiReport("entry %d (offset %d, position %d): position is not the start of a batch", i, e.Offset, e.Position)
		case e.Offset < h.BaseOffset || e.Offset > h.LastOffset():
			c.oiReport("entry %d (offset %d, position %d): the batch there holds offsets %d..%d", i, e.Offset, e.Position, h.BaseOffset, h.LastOffset())
		}
	}
	if h.MaxTimestamp > c.maxTs {
		c.maxTs = h.MaxTimestamp
	}
	for ; c.tiNext < len(c.ti) && c.ti[c.tiNext].Offset <= h.LastOffset(); c.tiNext++ {
		i, e := c.tiNext, c.ti[c.tiNext]
		switch {
		case c.tiBad[i]:
		case e.Offset != h.LastOffset():
			c.tiReport("entry %d (timestamp %d, offset %d): offset is not the last offset of a batch (the batch at byte %d holds %d..%d)", i, e.Timestamp, e.Offset, pos, h.BaseOffset, h.LastOffset())
		case e.Timestamp != h.MaxTimestamp || e.Timestamp != c.maxTs:
			c.tiReport("entry %d (timestamp %d, offset %d): the batch's max timestamp is %d and the log's largest up to there %d", i, e.Timestamp, e.Offset, h.MaxTimestamp, c.maxTs)
		}
	}
	c.lastBatch, c.haveBatch = h, true
}

// finish reports the entries that point past the batches read. complete
// says the whole .log was read; otherwise its walk stopped at byte end.
func (c *indexCheck) finish(end int64, complete bool) {
	if !complete {
		if n := len(c.oi) - c.oiNext; n > 0 {
			c.oiReport("%d entries from entry %d on point at or past byte %d, where the log cannot be read: not checked", n, c.oiNext, end)
		}
		if n := len(c.ti) - c.tiNext; n > 0 {
			c.tiReport("%d entries from entry %d on point at or past byte %d, where the log cannot be read: not checked", n, c.tiNext, end)
		}
		return
	}
	for ; c.oiNext < len(c.oi); c.oiNext++ {
		if i, e := c.oiNext, c.oi[c.oiNext]; !c.oiBad[i] {
			c.oiReport("entry %d (offset %d, position %d): position at or past the end of the log (%d bytes)", i, e.Offset, e.Position, end)
		}
	}
	last := c.base - 1
	if c.haveBatch {
		last = c.lastBatch.LastOffset()
	}
	for ; c.tiNext < len(c.ti); c.tiNext++ {
		if i, e := c.tiNext, c.ti[c.tiNext]; !c.tiBad[i] {
			c.tiReport("entry %d (timestamp %d, offset %d): offset past the log's last offset %d", i, e.Timestamp, e.Offset, last)
		}
	}
}

// offsetCheck checks that the batches of a segment follow one another: the
// first starts at the segment's base offset, each next one right after the
// one before. (Compaction, once built, will leave gaps between batches.)
type offsetCheck struct {
	base  int64
	next  int64
	first bool
}

func newOffsetCheck(base int64) *offsetCheck {
	return &offsetCheck{base: base, next: base, first: true}
}

// batch returns what is wrong with the offsets of the batch at pos, or "".
func (c *offsetCheck) batch(pos int64, h batch.Header) string {
	var msg string
	switch {
	case c.first && h.BaseOffset != c.base:
		msg = fmt.Sprintf("first batch (at byte %d) starts at offset %d, the file name says %d", pos, h.BaseOffset, c.base)
	case !c.first && h.BaseOffset > c.next:
		msg = fmt.Sprintf("batch at byte %d starts at offset %d, the one before it ends at %d: offsets %d..%d are missing", pos, h.BaseOffset, c.next-1, c.next, h.BaseOffset-1)
	case !c.first && h.BaseOffset < c.next:
		msg = fmt.Sprintf("batch at byte %d starts at offset %d, not after the one before it, which ends at %d", pos, h.BaseOffset, c.next-1)
	}
	if c.first {
		c.next = h.NextOffset()
	} else {
		c.next = max(c.next, h.NextOffset())
	}
	c.first = false
	return msg
}
