// Package machinetest holds test fixtures for package machine: an in-memory
// leader-epoch cache that answers as Kafka's LeaderEpochFileCache does.
package machinetest

import "github.com/strata-log/strata/replica/internal/machine"

// Epochs is an in-memory leader-epoch cache of a log: (epoch, start offset)
// pairs, both increasing, and the log end offset. Its zero value is an empty
// log with no epochs. It implements machine.EpochCache.
type Epochs struct {
	Entries []machine.EpochEnd // EndOffset holds the epoch's start offset
	End     int64              // the log end offset
}

// Assign records that epoch starts at offset, as a log does when a leader
// starts an epoch or a batch of a new epoch is appended; entries of larger
// or equal epochs or of larger start offsets are dropped first. An epoch
// already latest is left alone.
func (c *Epochs) Assign(epoch int32, start int64) {
	if n := len(c.Entries); n > 0 && c.Entries[n-1].Epoch == epoch {
		return
	}
	keep := c.Entries[:0]
	for _, e := range c.Entries {
		if e.Epoch < epoch && e.EndOffset < start {
			keep = append(keep, e)
		}
	}
	c.Entries = append(keep, machine.EpochEnd{Epoch: epoch, EndOffset: start})
}

// TruncateTo drops every record at or above end: epochs that start there or
// later go, even when end is the log end (an epoch with no records).
func (c *Epochs) TruncateTo(end int64) {
	if end > c.End {
		return
	}
	keep := c.Entries[:0]
	for _, e := range c.Entries {
		if e.EndOffset < end {
			keep = append(keep, e)
		}
	}
	c.Entries, c.End = keep, end
}

// Latest returns the latest epoch, NoEpoch if none.
func (c *Epochs) Latest() int32 {
	if len(c.Entries) == 0 {
		return machine.NoEpoch
	}
	return c.Entries[len(c.Entries)-1].Epoch
}

// EndOffsetFor implements machine.EpochCache.
func (c *Epochs) EndOffsetFor(epoch int32) (int32, int64) {
	n := len(c.Entries)
	switch {
	case epoch == machine.NoEpoch || n == 0:
		return machine.NoEpoch, machine.NoOffset
	case c.Entries[n-1].Epoch == epoch:
		return epoch, c.End
	case c.Entries[n-1].Epoch < epoch:
		return machine.NoEpoch, machine.NoOffset
	case epoch < c.Entries[0].Epoch:
		return epoch, c.Entries[0].EndOffset
	}
	// the largest entry ≤ epoch, ended by the next one's start
	i := n - 1
	for c.Entries[i].Epoch > epoch {
		i--
	}
	return c.Entries[i].Epoch, c.Entries[i+1].EndOffset
}
