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
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/vfs"
)

// ShareStateTopic is the internal topic that holds the share groups'
// share-partition state (KIP-932), as Kafka's share coordinator writes it:
// ShareSnapshot and ShareUpdate records keyed by (group, topic id,
// partition). It is created on first use, is not listed by Topics and
// cannot be created or deleted by users.
const ShareStateTopic = "__share_group_state"

// shareStateTopicConfig is the configuration ShareStateTopic is created
// with, but its flush policy (shareStateConfig). The records before the
// oldest of the share-partitions' latest snapshots are dropped
// (DeleteRecordsBefore), as Kafka's share coordinator prunes its topic.
var shareStateTopicConfig = TopicConfig{Partitions: 1, RetentionTime: -1, Cleanup: CleanupDelete}

// shareStateConfig is the configuration ShareStateTopic is created with:
// its flush policy is the broker's (Config.DefaultTopic's FlushMessages
// and FlushInterval), as that of TransactionStateTopic (txnStateConfig).
// Kafka fsyncs neither and relies on replication; a standalone broker
// makes a share-partition's state as durable as the records it hands out,
// never less (shareStateLog.write):
//
//   - A write goes to the page cache, in order, before the acknowledgement
//     is answered: a process crash (kill -9) loses no acknowledgement and
//     accepts no record twice.
//   - A write of a share-partition whose topic fsyncs by itself
//     (FlushMessages or FlushInterval set on it) is fsynced before it is
//     answered (concurrent writes share the fsync: group commit), so a
//     power loss loses no acknowledgement of it either.
//   - With the broker's FlushMessages 1 every write is fsynced.
//
// With the default page-cache policy (FlushMessages 0), a power loss may
// lose the latest acknowledgements (what is left is a prefix of the
// state's records): their records are delivered again, at least once, as
// on Kafka's one unreplicated broker. A data dir whose ShareStateTopic was
// created before keeps the FlushMessages 1 it was created with.
func (b *Broker) shareStateConfig() TopicConfig {
	cfg := shareStateTopicConfig
	cfg.FlushMessages = b.cfg.DefaultTopic.FlushMessages
	cfg.FlushInterval = b.cfg.DefaultTopic.FlushInterval
	return cfg.WithDefaults()
}

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

	// names maps the topic ids the records' keys carry (tp.TopicID) to
	// topic names; used by the writer only (writing).
	names map[[16]byte]string
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

// Append writes records to ShareStateTopic, creating it on first use, as
// durable as shareStateConfig says, and returns the offset of the first.
// Records of concurrent Appends share a batch (and its fsync); one Append
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

// write appends records as one batch, in the page cache, and fsyncs it
// before it returns if the topic fsyncs every batch or one of the records
// names a partition whose topic fsyncs by itself (shareStateConfig). A
// failed append or fsync leaves the topic read-only (sticky) with nothing
// answered.
func (l *shareStateLog) write(records []share.Record) (int64, error) {
	p, err := l.b.internalPartition(ShareStateTopic, l.b.shareStateConfig())
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
	if err != nil || p.config().FlushMessages == 1 || !l.needsSync(records) {
		return base, err // FlushMessages 1: AppendBatch fsynced it
	}
	return base, p.syncTo(base+int64(len(records)), false)
}

// needsSync reports whether one of records names a partition of a topic
// that fsyncs by itself (FlushMessages or FlushInterval set). A key it
// cannot read needs it; a deleted topic does not (no records to keep).
func (l *shareStateLog) needsSync(records []share.Record) bool {
	var last [16]byte
	for i, r := range records {
		id, part, err := share.StateKeyPartition(r.Key)
		if err != nil {
			return true
		}
		if i > 0 && id == last {
			continue // most writes are of one topic: looked up once
		}
		last = id
		name, ok := l.names[id]
		if !ok {
			if l.names == nil {
				l.names = map[[16]byte]string{}
			}
			for _, t := range l.b.Topics() {
				l.names[tp.TopicID(t)] = t
			}
			if name, ok = l.names[id]; !ok {
				continue
			}
		}
		p, err := l.b.Partition(name, int(part))
		if err != nil {
			continue
		}
		if c := p.config(); c.FlushMessages > 0 || c.FlushInterval > 0 {
			return true
		}
	}
	return false
}

// DeleteBefore drops the records before offset: those every
// share-partition's latest snapshot made obsolete (share.StatePruner).
// It first fsyncs every record written, those snapshots with them: the
// new start is durable at once (DeleteRecordsBefore), and a power loss
// that kept it but lost the snapshots in the page cache would leave no
// state at all of the share-partitions.
func (l *shareStateLog) DeleteBefore(offset int64) error {
	p, err := l.b.internalPartition(ShareStateTopic, l.b.shareStateConfig())
	if err != nil {
		return err
	}
	if err := p.syncTo(p.EndOffset(), false); err != nil {
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
