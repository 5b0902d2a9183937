package log

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kafka's OffsetsForLeaderEpoch answer for an epoch it cannot place.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochEntry says that leader epoch Epoch wrote the records from StartOffset
// on (up to the next entry's StartOffset).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is Kafka's LeaderEpochFileCache without the file: (epoch, start
// offset) pairs, both strictly increasing. Its methods do no IO; each
// returns a new slice (or the same one if nothing changed) so that the
// partition can publish it atomically to readers. The zero value is empty.
type epochCache []EpochEntry

// latest is the last entry; ok is false for an empty cache.
func (c epochCache) latest() (EpochEntry, bool) {
	if len(c) == 0 {
		return EpochEntry{}, false
	}
	return c[len(c)-1], true
}

// assign records that epoch starts at offset, Kafka's rules: nothing changes
// when epoch is already the latest and started at or before offset; otherwise
// every entry with an epoch at or above epoch, or a start at or above
// offset, is dropped (they can no longer be true) and the entry is added.
// Negative epochs or offsets (batches written without an epoch) change
// nothing. changed reports whether the cache changed.
func (c epochCache) assign(epoch int32, offset int64) (out epochCache, changed bool) {
	if epoch < 0 || offset < 0 {
		return c, false
	}
	if l, ok := c.latest(); ok && l.Epoch == epoch && l.StartOffset <= offset {
		return c, false
	}
	out = make(epochCache, 0, len(c)+1)
	for _, e := range c {
		if e.Epoch < epoch && e.StartOffset < offset {
			out = append(out, e)
		}
	}
	return append(out, EpochEntry{Epoch: epoch, StartOffset: offset}), true
}

// truncateFromEnd drops the entries that start at or after end: the log was
// cut there. A negative end (undefined) changes nothing.
func (c epochCache) truncateFromEnd(end int64) (epochCache, bool) {
	if end < 0 {
		return c, false
	}
	i := len(c)
	for i > 0 && c[i-1].StartOffset >= end {
		i--
	}
	if i == len(c) {
		return c, false
	}
	return slices.Clone(c[:i]), true
}

// truncateFromStart drops the entries wholly below start, the new log start
// offset; the entry holding start now starts there. A negative start
// (undefined) changes nothing.
func (c epochCache) truncateFromStart(start int64) (epochCache, bool) {
	if start < 0 {
		return c, false
	}
	// k: the last entry starting at or below start.
	k := -1
	for i, e := range c {
		if e.StartOffset <= start {
			k = i
		}
	}
	if k < 0 || (k == 0 && c[0].StartOffset == start) {
		return c, false
	}
	out := slices.Clone(c[k:])
	out[0].StartOffset = start
	return out, true
}

// endOffsetFor is Kafka's endOffsetFor (KIP-101, KIP-279): for the latest
// epoch, (epoch, leo); otherwise the largest known epoch at or below the
// requested one and the start offset of the epoch after it. An epoch below
// every known one answers (epoch, start of the first known epoch), as Kafka
// does since KIP-279; UndefinedEpoch, an empty cache or an epoch above the
// latest answer (UndefinedEpoch, UndefinedEpochOffset).
func (c epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	l, ok := c.latest()
	switch {
	case epoch == UndefinedEpoch || !ok:
		return UndefinedEpoch, UndefinedEpochOffset
	case epoch == l.Epoch:
		return epoch, leo
	case epoch > l.Epoch:
		return UndefinedEpoch, UndefinedEpochOffset
	}
	// higher: the first entry with an epoch above the requested one.
	higher := 0
	for higher < len(c) && c[higher].Epoch <= epoch {
		higher++
	}
	if higher == 0 {
		return epoch, c[0].StartOffset
	}
	return c[higher-1].Epoch, c[higher].StartOffset
}

// epochForOffset returns the epoch that wrote offset: the one of the last
// entry starting at or below it.
func (c epochCache) epochForOffset(offset int64) (int32, bool) {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].StartOffset <= offset {
			return c[i].Epoch, true
		}
	}
	return 0, false
}

// valid reports whether epochs and start offsets both strictly increase
// and none is negative.
func (c epochCache) valid() bool {
	for i, e := range c {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return false
		}
		if i > 0 && (e.Epoch <= c[i-1].Epoch || e.StartOffset <= c[i-1].StartOffset) {
			return false
		}
	}
	return true
}

// The leader-epoch-checkpoint file, one per partition directory, in Kafka's
// text format:
//
//	0           version
//	2           number of entries
//	0 0         epoch start-offset
//	3 1042
const epochCheckpointFile = "leader-epoch-checkpoint"

func formatEpochCheckpoint(c epochCache) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n%d\n", checkpointVersion, len(c))
	for _, e := range c {
		fmt.Fprintf(&buf, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return buf.Bytes()
}

// parseEpochCheckpoint parses a leader-epoch-checkpoint. A file that does
// not parse in full, or whose entries do not strictly increase, is an
// error: the caller rebuilds the cache from the log instead of trusting it.
func parseEpochCheckpoint(data []byte) (epochCache, error) {
	bad := func(why string) error { return fmt.Errorf("log: %s: %w: %s", epochCheckpointFile, ErrCorrupt, why) }
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, bad("does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(checkpointVersion) {
		return nil, bad("unknown version")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, bad("entry count does not match")
	}
	c := make(epochCache, 0, n)
	for _, line := range lines[2:] {
		f := strings.Split(line, " ")
		if len(f) != 2 {
			return nil, bad("malformed line " + strconv.Quote(line))
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad("malformed line " + strconv.Quote(line))
		}
		c = append(c, EpochEntry{Epoch: int32(epoch), StartOffset: off})
	}
	if !c.valid() {
		return nil, bad("entries do not increase")
	}
	return c, nil
}
