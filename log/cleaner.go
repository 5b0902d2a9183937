package log

import (
	"math"
	"time"
)

// The log cleaner (compaction) in three parts: this file plans, without IO,
// which part of a partition is cleanable, whether it is dirty enough to
// clean, and which segments are cleaned into one; cleaner_offsetmap.go is
// the bounded map of key → latest offset; cleaner_run.go does the IO.
//
// As in Kafka: the log of a compacted partition is a clean part, where each
// key appears at most once (plus tombstones within their delete retention),
// followed by a dirty part, from the first dirty offset to the end. A pass
// maps the keys of the dirty part to their latest offsets, as far as the
// map holds them, then copies every segment from the start of the log to
// where the map ends, keeping a record only if no later record of its key
// was mapped. The active segment, and every segment from the first one that
// holds a record younger than MinCompactionLag or one not below the high
// watermark, are never cleaned. Offsets
// never change, so a cleaned log has gaps.
//
// Compressed batches are cleaned as Kafka's MemoryRecords.filterTo cleans
// them (batch.Filter): decompressed, their retained records compressed
// again with the batch's codec, header fields kept (attributes, producer id,
// epoch and base sequence, leader epoch, base and last offset); a batch that
// keeps every record is copied unchanged, and one that keeps none is dropped
// or, when it must stay (its producer's last, or the end of a cleaned
// segment), becomes an empty batch without compression.
//
// Transactions follow Kafka's LogCleaner rules (cleaner_txn.go): nothing at
// or past the last stable offset is cleaned, aborted data goes, markers go
// a delete retention after their transaction's data, and the .txnindex of
// a cleaned segment holds the entries of the ABORT markers it keeps.

// segInfo is what the planner knows of a segment.
type segInfo struct {
	base, next int64 // base offset; offset after its last batch
	size       int64 // bytes
	maxTs      int64 // largest timestamp, ms; -1 if none
}

// cleanInput is a compacted partition as the planner sees it.
type cleanInput struct {
	segs       []segInfo // sorted; the last is the active segment
	start      int64     // log start offset
	hw         int64     // high watermark: records at or above it are never cleaned; < 0: no bound
	firstDirty int64     // where the dirty part starts (the cleaner's checkpoint)
	// firstDirtyTs is the timestamp (ms) of the first batch at or after
	// firstDirty; -1 if unknown.
	firstDirtyTs int64
	now          time.Time
	minLag       time.Duration
	maxLag       time.Duration // 0: unlimited
	minRatio     float64
}

// cleanPlan is the planner's answer for one partition.
type cleanPlan struct {
	firstDirty int64 // clamped to the log
	// end is the first uncleanable offset: the base of the active segment
	// or of the first segment within MinCompactionLag.
	end int64
	// uncleanable is the index in segs of the segment that starts at end.
	uncleanable            int
	cleanBytes, dirtyBytes int64
	ratio                  float64 // dirty / (clean + dirty)
	forced                 bool    // MaxCompactionLag passed for the first dirty record
	due                    bool    // a pass should run
}

// planCleaning applies Kafka's LogCleanerManager rules to one partition.
func planCleaning(in cleanInput) cleanPlan {
	var p cleanPlan
	n := len(in.segs)
	if n == 0 {
		return p
	}
	// The cleanable part ends at the active segment, or earlier at the first
	// segment holding a record younger than the min compaction lag.
	p.uncleanable = n - 1
	if in.hw >= 0 {
		for i := 0; i < p.uncleanable; i++ {
			if in.segs[i].next > in.hw {
				p.uncleanable = i
				break
			}
		}
	}
	if in.minLag > 0 {
		limit := in.now.Add(-in.minLag).UnixMilli()
		for i := 0; i < p.uncleanable; i++ {
			if in.segs[i].maxTs > limit {
				p.uncleanable = i
				break
			}
		}
	}
	p.end = in.segs[p.uncleanable].base
	p.firstDirty = min(max(in.firstDirty, in.start, in.segs[0].base), p.end)
	for _, s := range in.segs[:p.uncleanable] {
		switch {
		case s.next <= p.firstDirty:
			p.cleanBytes += s.size
		default: // holds dirty records (a partly mapped segment counts as dirty)
			p.dirtyBytes += s.size
		}
	}
	if p.dirtyBytes == 0 || p.firstDirty >= p.end {
		return p
	}
	p.ratio = float64(p.dirtyBytes) / float64(p.cleanBytes+p.dirtyBytes)
	if in.maxLag > 0 && in.firstDirtyTs >= 0 && in.firstDirtyTs <= in.now.Add(-in.maxLag).UnixMilli() {
		p.forced = true
	}
	p.due = p.forced || p.ratio >= in.minRatio
	return p
}

// groupLimits bound a cleaned segment: what a segment may hold.
type groupLimits struct {
	maxBytes      int64 // SegmentBytes
	maxIndexBytes int64 // MaxIndexBytes
	indexInterval int64 // IndexIntervalBytes, to estimate index entries
}

// indexBytes estimates the bytes of the larger index (the time index, 12
// bytes an entry) of a segment of size bytes: an entry every indexInterval
// bytes. An index that fills up is not an error (entries get sparser).
func (l groupLimits) indexBytes(size int64) int64 {
	return (size/max(l.indexInterval, 1) + 1) * 12
}

// groupSegments splits segs (consecutive sealed segments, in order) into
// runs cleaned into one segment each, as Kafka's groupSegmentsBySize: a run
// grows while the sum of its sizes stays within maxBytes, its estimated
// index within maxIndexBytes, and its offsets within the range a segment's
// relative offsets can index. Each run has at least one segment. The result
// holds the number of segments in each run.
func groupSegments(segs []segInfo, l groupLimits) []int {
	var runs []int
	for i := 0; i < len(segs); {
		j := i + 1
		size, idx := segs[i].size, l.indexBytes(segs[i].size)
		for j < len(segs) {
			s := segs[j]
			if size+s.size > l.maxBytes || idx+l.indexBytes(s.size) > l.maxIndexBytes ||
				s.next-1-segs[i].base > math.MaxInt32 {
				break
			}
			size += s.size
			idx += l.indexBytes(s.size)
			j++
		}
		runs = append(runs, j-i)
		i = j
	}
	return runs
}

// pickDirtiest returns the index of the plan to clean first: a forced one
// (MaxCompactionLag) before any other, then the highest dirty ratio; -1 if
// no plan is due.
func pickDirtiest(plans []cleanPlan) int {
	best := -1
	for i, p := range plans {
		if !p.due {
			continue
		}
		if best < 0 || p.forced && !plans[best].forced ||
			p.forced == plans[best].forced && p.ratio > plans[best].ratio {
			best = i
		}
	}
	return best
}
