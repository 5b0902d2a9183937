package log

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/vfs"
)

// ShareStateTopic is the internal topic that holds the share groups'
// share-partition state (KIP-932), as Kafka's share coordinator writes it:
// ShareSnapshot and ShareUpdate records keyed by (group, topic id,
// partition). It is created on first use, is not listed by Topics and
// cannot be created or deleted by users.
const ShareStateTopic = "__share_group_state"

// shareStateTopicConfig: every write is fsynced before the share
// coordinator answers (an accepted record is never delivered again after a
// crash); the records before the oldest of the share-partitions' latest
// snapshots are dropped (DeleteRecordsBefore), as Kafka's share
// coordinator prunes its topic.
var shareStateTopicConfig = TopicConfig{Partitions: 1, FlushMessages: 1, RetentionTime: -1, Cleanup: CleanupDelete}

// shareConfigsFile holds the share groups' configurations
// (share.auto.offset.reset, share.record.lock.duration.ms,
// share.delivery.count.limit), which Kafka keeps in its cluster metadata.
const shareConfigsFile = "share_group_configs.json"

// internalTopic reports whether name is one of the broker's internal
// topics, which users neither list, create nor delete.
func internalTopic(name string) bool {
	return name == OffsetsTopic || name == ShareStateTopic || name == TransactionStateTopic
}

// startShares starts the share coordinator over ShareStateTopic, which it
// replays: the share-partitions come back as they were last written.
func (b *Broker) startShares() error {
	configs, _, err := readMetaFile(b.fs, filepath.Join(b.dir, shareConfigsFile), shareConfigsFile, decodeShareConfigs)
	if err != nil {
		_ = b.groups.Close()
		return err
	}
	c, err := share.Open(context.Background(), share.Config{
		Partitions: func(t string) (int, error) {
			if internalTopic(t) {
				return 0, fmt.Errorf("log: %s: %w", t, ErrUnknownTopic)
			}
			return b.Partitions(context.Background(), t)
		},
		Offsets: func(t TopicPartition) (int64, int64, error) {
			p, err := b.Partition(t.Topic, t.Partition)
			if err != nil {
				return 0, 0, err
			}
			return p.StartOffset(), p.HighWatermark(), nil
		},
		TopicNames: b.Topics,
		OtherGroup: func(g string) bool {
			_, ok := b.groups.Type(g)
			return ok
		},
		Clock:             b.cfg.Clock,
		Logger:            b.logger,
		GroupConfigs:      configs,
		StoreGroupConfigs: b.storeShareConfigs,
	}, &shareStateLog{b: b})
	if err != nil {
		// open fails: the group coordinator started before goes too (open
		// closes the store and the wheel only).
		_ = b.groups.Close()
		return fmt.Errorf("log: start share coordinator: %w", err)
	}
	b.shares = c
	return nil
}

// closeShares stops the share coordinator (Close).
func (b *Broker) closeShares() {
	if b.shares != nil {
		b.shares.Close()
	}
}

// ShareCoordinator returns the broker's share coordinator: share groups'
// heartbeats, acquisitions and acknowledgements (a Kafka server's
// ShareGroupHeartbeat, ShareFetch and ShareAcknowledge) and their admin.
func (b *Broker) ShareCoordinator() *share.Coordinator { return b.shares }

// shareStateLog is ShareStateTopic as the share coordinator writes and
// replays it (share.StateLog). Appends that come while one is written go
// out together as the next batch, one write and one fsync for all of
// them (group commit): acknowledgements of many members and partitions
// made durable at the cost of one.
type shareStateLog struct {
	b *Broker

	mu      sync.Mutex
	writing bool              // an Append is writing: the others queue
	next    *shareStateCommit // the records queued for the next write
}

// shareStateCommit is one write of queued records and its outcome.
type shareStateCommit struct {
	recs []share.Record
	done chan struct{} // closed once written (or failed)
	base int64         // the offset of recs[0]
	err  error
}

var (
	_ share.StateLog    = (*shareStateLog)(nil)
	_ share.StatePruner = (*shareStateLog)(nil)
)

// Replay reads ShareStateTopic from its start to its end, if it exists.
func (l *shareStateLog) Replay(ctx context.Context, fn func(offset int64, key, value []byte) error) error {
	l.b.mu.RLock()
	t, ok := l.b.topics[ShareStateTopic]
	l.b.mu.RUnlock()
	if !ok {
		return nil
	}
	p := t.parts[0]
	for off, end := p.StartOffset(), p.EndOffset(); off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw, err := p.ReadBatches(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("log: read %s: %w", p, err)
		}
		if len(raw) == 0 {
			return nil
		}
		err = batch.Batches(raw, func(bt []byte, h batch.Header) error {
			off = h.NextOffset()
			return batch.Records(bt, h, func(r *batch.Record) error {
				if err := fn(r.Offset, r.Key, r.Value); err != nil {
					return fmt.Errorf("offset %d: %w", r.Offset, err)
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("log: read %s: %w", p, err)
		}
	}
	return nil
}

// Append makes records durable in ShareStateTopic, creating it on first
// use, and returns the offset of the first. Records of concurrent
// Appends share a batch (the topic fsyncs every batch); one Append
// writes while the others wait, then writes what queued meanwhile.
func (l *shareStateLog) Append(records []share.Record) (int64, error) {
	l.mu.Lock()
	if l.next == nil {
		l.next = &shareStateCommit{done: make(chan struct{})}
	}
	mine, first := l.next, len(l.next.recs)
	mine.recs = append(mine.recs, records...)
	if l.writing {
		l.mu.Unlock()
		<-mine.done
		return mine.base + int64(first), mine.err
	}
	l.writing = true
	for l.next != nil {
		c := l.next
		l.next = nil
		l.mu.Unlock()
		c.base, c.err = l.write(c.recs)
		close(c.done)
		l.mu.Lock()
	}
	l.writing = false
	l.mu.Unlock()
	return mine.base + int64(first), mine.err
}

// write appends records as one batch, fsynced.
func (l *shareStateLog) write(records []share.Record) (int64, error) {
	p, err := l.b.internalPartition(ShareStateTopic, shareStateTopicConfig)
	if err != nil {
		return 0, err
	}
	bd := pooledBuilder(p.config().Compression.appendCodec())
	defer builders.Put(bd)
	now := l.b.cfg.Clock.Now().UnixMilli()
	bd.Reset(now)
	for _, r := range records {
		bd.Append(now, r.Key, r.Value, nil)
	}
	base, _, err := p.AppendBatch(bd.Bytes())
	return base, err
}

// DeleteBefore drops the records before offset: those every
// share-partition's latest snapshot made obsolete (share.StatePruner).
func (l *shareStateLog) DeleteBefore(offset int64) error {
	p, err := l.b.internalPartition(ShareStateTopic, shareStateTopicConfig)
	if err != nil {
		return err
	}
	_, err = p.DeleteRecordsBefore(offset)
	return err
}

// internalPartition returns the partition of an internal topic, creating
// the topic on first use.
func (b *Broker) internalPartition(name string, cfg TopicConfig) (*Partition, error) {
	b.mu.RLock()
	t, ok := b.topics[name]
	closed := b.closed
	b.mu.RUnlock()
	if ok && !closed {
		return t.parts[0], nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("log: %s: %w", name, ErrClosed)
	}
	t, ok = b.topics[name]
	if !ok {
		var err error
		if t, err = b.createTopicLocked(name, cfg.WithDefaults()); err != nil {
			return nil, err
		}
	}
	return t.parts[0], nil
}

// shareConfigsJSON is share_group_configs.json.
type shareConfigsJSON struct {
	Version int                        `json:"version"`
	Groups  map[string]shareConfigJSON `json:"groups"`
}

type shareConfigJSON struct {
	AutoOffsetReset    string `json:"autoOffsetReset,omitempty"`
	LockDurationMs     int64  `json:"lockDurationMs,omitempty"`
	DeliveryCountLimit int    `json:"deliveryCountLimit,omitempty"`
}

func decodeShareConfigs(data []byte) (map[string]share.GroupConfig, error) {
	var f shareConfigsJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("unknown version %d", f.Version)
	}
	out := make(map[string]share.GroupConfig, len(f.Groups))
	for g, j := range f.Groups {
		out[g] = share.GroupConfig{AutoOffsetReset: j.AutoOffsetReset, LockDuration: time.Duration(j.LockDurationMs) * time.Millisecond, DeliveryCountLimit: j.DeliveryCountLimit}
	}
	return out, nil
}

// storeShareConfigs writes share_group_configs.json (share.Config's
// StoreGroupConfigs).
func (b *Broker) storeShareConfigs(all map[string]share.GroupConfig) error {
	f := shareConfigsJSON{Version: 1, Groups: map[string]shareConfigJSON{}}
	for g, c := range all {
		f.Groups[g] = shareConfigJSON{AutoOffsetReset: c.AutoOffsetReset, LockDurationMs: c.LockDuration.Milliseconds(), DeliveryCountLimit: c.DeliveryCountLimit}
	}
	data, _ := json.Marshal(f) // strings and numbers only: cannot fail (map keys sorted)
	if err := vfs.WriteFileAtomic(b.fs, filepath.Join(b.dir, shareConfigsFile), append(data, '\n')); err != nil {
		return fmt.Errorf("log: write %s: %w", shareConfigsFile, err)
	}
	return nil
}
