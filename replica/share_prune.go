package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// Pruning __share_group_state, as Kafka's share coordinator prunes it
// (share.coordinator.state.topic.prune.interval.ms): a share-partition's
// latest ShareSnapshot holds all of its state, so the records before it —
// its older snapshots and their updates — are needed no more. Every
// interval, the leader of each partition of __share_group_state reads its
// replica up to the high watermark and moves the log start up to the
// lowest offset still needed there (DeleteRecords), which the followers
// follow: the latest snapshot of each live share-partition, the latest
// record of each other key (a group's configs) and what comes after.
// Several members write a partition (the leaders of the share-partitions
// it holds); whatever they append meanwhile is past the high watermark
// read, and so kept.

// shareStatePruneInterval is Kafka's
// share.coordinator.state.topic.prune.interval.ms.
const shareStatePruneInterval = 5 * time.Minute

// shareStateNeeds is what a partition of __share_group_state still needs,
// as its records are read in order (add).
type shareStateNeeds struct {
	snapshot map[string]int64 // a share-partition's latest snapshot, by its key without the record type
	latest   map[string]int64 // the latest record of every other key (configs)
}

// add notes the record at offset.
func (n *shareStateNeeds) add(offset int64, key, value []byte) {
	if n.snapshot == nil {
		n.snapshot, n.latest = map[string]int64{}, map[string]int64{}
	}
	if len(key) < 2 || string(key) == string(shareBarrierKey) {
		return // a load's barrier: needed by no one once written
	}
	switch binary.BigEndian.Uint16(key) {
	case 0, 1: // ShareSnapshot, ShareUpdate (share's record types)
		id := string(key[2:])
		switch {
		case value == nil: // the share-partition was deleted
			delete(n.snapshot, id)
		case key[1] == 0:
			n.snapshot[id] = offset
		}
		// An update needs its snapshot, which comes before it.
	default:
		if value == nil {
			delete(n.latest, string(key)) // a tombstone: it comes after what it deletes
		} else {
			n.latest[string(key)] = offset
		}
	}
}

// lowest returns the lowest offset still needed, or end if none is.
func (n *shareStateNeeds) lowest(end int64) int64 {
	low := end
	for _, o := range n.snapshot {
		low = min(low, o)
	}
	for _, o := range n.latest {
		low = min(low, o)
	}
	return low
}

// pruneShareStateLoop prunes the partitions of __share_group_state this
// member leads every shareStatePruneInterval, until Close.
func (b *Broker) pruneShareStateLoop() {
	t := b.cfg.Clock.NewTimer(shareStatePruneInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
		case <-b.ctx.Done():
			return
		}
		if err := b.pruneShareState(b.ctx); err != nil && b.ctx.Err() == nil {
			b.log.Warn("replica: prune "+log.ShareStateTopic, "err", err)
		}
		t.Reset(shareStatePruneInterval)
	}
}

// pruneShareState prunes each partition of __share_group_state this
// member leads now.
func (b *Broker) pruneShareState(ctx context.Context) error {
	t, ok := b.img.Load().Topic(log.ShareStateTopic)
	if !ok {
		return nil
	}
	var errs []error
	for _, st := range t.Partitions {
		tp := log.TopicPartition{Topic: log.ShareStateTopic, Partition: st.Partition}
		ps := b.part(tp)
		if st.Leader != b.cfg.ID || ps == nil || !ps.leading.Load() {
			continue
		}
		if err := b.pruneShareStatePartition(ctx, ps.p); err != nil {
			errs = append(errs, fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, err))
		}
	}
	return errors.Join(errs...)
}

// pruneShareStatePartition moves p's log start up to the lowest offset
// its records up to the high watermark still need.
func (b *Broker) pruneShareStatePartition(ctx context.Context, p *log.Partition) error {
	start, hw := p.StartOffset(), p.HighWatermark()
	var needs shareStateNeeds
	for off := start; off < hw; {
		if err := ctx.Err(); err != nil {
			return err
		}
		bs, err := p.Slice(off, 1<<20, hw)
		if err != nil {
			var oor *log.OffsetOutOfRangeError
			if errors.As(err, &oor) && off < p.StartOffset() {
				return nil // pruned meanwhile (the partition's leadership moved and came back)
			}
			return err
		}
		raw, err := bs.Bytes()
		bs.Release()
		if err != nil {
			return err
		}
		if len(raw) == 0 {
			break
		}
		next := off
		err = batch.Batches(raw, func(bt []byte, h batch.Header) error {
			next = max(next, h.NextOffset())
			if h.Control() {
				return nil
			}
			return batch.Records(bt, h, func(r *batch.Record) error {
				if r.Offset >= off && r.Offset < hw {
					needs.add(r.Offset, r.Key, r.Value)
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		if next <= off {
			break
		}
		off = next
	}
	low := needs.lowest(hw)
	if low <= start {
		return nil
	}
	if _, err := p.DeleteRecordsBefore(low); err != nil {
		return fmt.Errorf("delete records before %d: %w", low, err)
	}
	b.log.Debug("replica: pruned "+log.ShareStateTopic, "partition", p, "before", low)
	return nil
}
