package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/tp"
)

// The driver of share groups: a Coordinator holds every share group's
// membership (group.go) and share-partitions (partition.go), arms their
// timers on the clock and writes the share-partitions' changes to
// __share_group_state (StateLog) before it answers. Locks: Coordinator.mu
// (the groups), then a group's mu (its members and share-partitions),
// then a share-partition's mu (its state and its writes, which go out in
// the order of the changes).

// TopicPartition names a partition of a topic.
type TopicPartition = tp.TopicPartition

// Record is a record of __share_group_state: a key and a value (nil: a
// tombstone).
type Record struct{ Key, Value []byte }

// StateLog is __share_group_state as the Coordinator writes and replays
// it.
type StateLog interface {
	// Replay calls fn with every record and its offset, in order.
	Replay(ctx context.Context, fn func(offset int64, key, value []byte) error) error
	// Append writes records, in order, and returns the offset of the
	// first once they are as durable as the log's policy makes them (a
	// broker's __share_group_state follows the broker's flush policy, and
	// fsyncs the writes for topics that fsync by themselves); an error
	// means none was acknowledged.
	Append(records []Record) (int64, error)
}

// StatePruner is a StateLog that can drop the records before an offset
// (DeleteRecords). With one, the Coordinator drops the records every
// share-partition's latest snapshot has made obsolete, as Kafka's share
// coordinator does.
type StatePruner interface {
	DeleteBefore(offset int64) error
}

// Config configures a Coordinator. The zero value of a field means its
// default, except the required ones.
type Config struct {
	// Partitions returns a topic's partition count; an error or 0: no
	// such topic. Required.
	Partitions func(topic string) (int, error)
	// Offsets returns a partition's log start offset and the offset up to
	// which its records may be delivered (its high watermark). Required.
	Offsets func(tp TopicPartition) (start, end int64, err error)
	// TopicNames lists the topics, to find a topic's name from the id
	// the records carry (tp.TopicID) at Open; nil: no state comes back.
	TopicNames func() []string
	// OtherGroup reports whether a group id is taken by a group of
	// another type (a classic or consumer group): a share heartbeat to it
	// is ErrGroupNotFound, as Kafka answers. nil: none is.
	OtherGroup func(group string) bool
	// Clock reads the time and arms the timers (session timeouts,
	// acquisition locks); nil → the system clock.
	Clock clock.Clock
	// Logger receives the coordinator's log lines; nil → discard.
	Logger *slog.Logger
	// SessionTimeout (group.share.session.timeout.ms, 45 s),
	// HeartbeatInterval (group.share.heartbeat.interval.ms, 5 s) and
	// MaxSize (group.share.max.size, 200) bound the members.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	MaxSize           int
	// Partition holds the broker's defaults of the share-partitions'
	// settings, which a group's GroupConfig overrides.
	Partition PartitionConfig
	// AutoOffsetReset is where a share-partition of a group that sets
	// none starts (share.auto.offset.reset; latest).
	AutoOffsetReset OffsetReset
	// GroupConfigs are the groups' configurations to start with (what
	// SetGroupConfig set before a restart); copied.
	GroupConfigs map[string]GroupConfig
	// StoreGroupConfigs makes the groups' configurations durable when
	// SetGroupConfig changes one (all of them, copied); nil: kept in
	// memory only.
	StoreGroupConfigs func(map[string]GroupConfig) error
	// SnapshotEvery: a share-partition's state is written whole (a
	// ShareSnapshot record) after this many updates
	// (share.coordinator.snapshot.update.records.per.snapshot, 500).
	SnapshotEvery int
	// ColdSnapshotInterval: every this often, a share-partition whose
	// latest snapshot is at least this old is written whole again
	// (share.coordinator.cold.partition.snapshot.interval.ms, 5 min), so
	// that an idle one does not keep the records of the busy ones in the
	// StateLog (a StatePruner drops those before the oldest latest
	// snapshot) nor make a replay long; negative: never.
	ColdSnapshotInterval time.Duration
	// Placement, in a cluster, says which groups' membership and which
	// partitions' share-partitions this broker serves now (cluster.go);
	// nil: all of them (a standalone broker).
	Placement Placement
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 500
	}
	if c.ColdSnapshotInterval == 0 {
		c.ColdSnapshotInterval = DefaultColdSnapshotInterval
	}
	if c.TopicNames == nil {
		c.TopicNames = func() []string { return nil }
	}
	if c.OtherGroup == nil {
		c.OtherGroup = func(string) bool { return false }
	}
	c.Partition = c.Partition.withDefaults()
	return c
}

func (c Config) validate() error {
	switch {
	case c.Partitions == nil || c.Offsets == nil:
		return fmt.Errorf("%w: Partitions and Offsets are required", ErrInvalidConfig)
	case c.SessionTimeout < 0 || c.HeartbeatInterval < 0 || c.MaxSize < 0 || c.SnapshotEvery < 0:
		return fmt.Errorf("%w: negative session timeout, heartbeat interval, max size or snapshot interval", ErrInvalidConfig)
	}
	return c.Partition.validate()
}

// DefaultColdSnapshotInterval is
// share.coordinator.cold.partition.snapshot.interval.ms.
const DefaultColdSnapshotInterval = 5 * time.Minute

// GroupConfig is a share group's own settings (Kafka's group configs,
// set with IncrementalAlterConfigs on the group). A zero field means the
// broker's (Config).
type GroupConfig struct {
	AutoOffsetReset    string        // share.auto.offset.reset: "", "latest" or "earliest"
	LockDuration       time.Duration // share.record.lock.duration.ms
	DeliveryCountLimit int           // share.delivery.count.limit
}

func (g GroupConfig) validate() error {
	if g.AutoOffsetReset != "" {
		if _, err := ParseOffsetReset(g.AutoOffsetReset); err != nil {
			return err
		}
	}
	if g.LockDuration < 0 || g.DeliveryCountLimit < 0 {
		return fmt.Errorf("%w: negative lock duration or delivery count limit", ErrInvalidConfig)
	}
	return (PartitionConfig{LockDuration: g.LockDuration, DeliveryCountLimit: g.DeliveryCountLimit}).validate()
}

// Coordinator is the share groups of a broker. It is safe for concurrent
// use.
type Coordinator struct {
	cfg   Config
	log   StateLog
	clock clock.Clock

	configMu sync.Mutex // SetGroupConfig, one at a time; before mu

	mu      sync.Mutex
	closed  bool
	groups  map[string]*groupEntry
	configs map[string]GroupConfig

	callbacks sync.WaitGroup // armed timers whose callback has not returned
	cold      *armed         // the cold-partition snapshot timer; under mu
	// writes counts the records written; coldWrites is its value after
	// the last cold-partition pass (that pass's callback only).
	writes     atomic.Int64
	coldWrites int64

	watchMu sync.Mutex
	watch   chan struct{} // closed when records become Available again (Watch)

	// pruneMu (a leaf) guards snaps, the log offset of each live
	// share-partition's latest snapshot, and pruned, the offset before
	// which the log's records were dropped.
	pruneMu sync.Mutex
	snaps   map[stateKey]int64
	pruned  int64
	pruner  StatePruner
}

type groupEntry struct {
	id       string
	mu       sync.Mutex
	g        *group
	sessions map[string]*armed // session timers, by member
	parts    map[TopicPartition]*partEntry
}

type partEntry struct {
	mu      sync.Mutex
	key     stateKey
	p       *partition
	timer   *armed    // the lock timer, armed at the earliest lock deadline
	updates int       // update records since the last snapshot
	epoch   int32     // snapshot epoch
	snapped time.Time // when its latest snapshot was written (or replayed)
	created time.Time
	gone    bool // deleted: a holder of the entry starts again
	// writing: an Acknowledge holds mu while its state is written;
	// acquirable: then, whether records may be acquired (Acquire).
	writing, acquirable atomic.Bool
}

type armed struct {
	at   time.Time
	stop clock.Stopper
}

// Open replays log and returns a running Coordinator. A record that
// does not decode is logged and skipped; a share-partition of a topic
// that no longer exists is forgotten.
func Open(ctx context.Context, cfg Config, log StateLog) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Coordinator{cfg: cfg, log: log, clock: cfg.Clock, groups: map[string]*groupEntry{}, configs: map[string]GroupConfig{}, snaps: map[stateKey]int64{}}
	c.pruner, _ = log.(StatePruner)
	for g, gc := range cfg.GroupConfigs {
		if gc.validate() == nil && gc != (GroupConfig{}) {
			c.configs[g] = gc
		}
	}
	if log == nil {
		return c, nil
	}
	names := map[[16]byte]string{}
	for _, t := range cfg.TopicNames() {
		names[tp.TopicID(t)] = t
	}
	err := log.Replay(ctx, func(offset int64, key, value []byte) error {
		kind, k, err := decodeKey(key)
		if errors.Is(err, errNotShareRecord) {
			return nil
		}
		if err != nil {
			cfg.Logger.Warn("share: skip a record of __share_group_state", "err", err)
			return nil
		}
		topic, ok := names[k.topicID]
		if !ok {
			return nil // a deleted topic's
		}
		t := TopicPartition{Topic: topic, Partition: int(k.partition)}
		if value == nil {
			if ge := c.groups[k.group]; ge != nil {
				delete(ge.parts, t)
			}
			delete(c.snaps, k)
			return nil
		}
		v, err := decodeValue(kind, value)
		if err != nil {
			cfg.Logger.Warn("share: skip a record of __share_group_state", "group", k.group, "partition", t, "err", err)
			return nil
		}
		ge := c.entry(k.group)
		pe := ge.parts[t]
		if pe == nil {
			if kind != recSnapshot {
				return nil // an update without its snapshot: nothing to apply it to
			}
			pe = &partEntry{key: k, p: newPartition(c.partitionConfig(k.group), v.start), created: time.UnixMilli(v.createMs)}
			ge.parts[t] = pe
		}
		if kind == recSnapshot {
			pe.p.resetTo(v.start)
			pe.epoch, pe.updates, pe.snapped = v.snapshotEpoch, 0, time.UnixMilli(v.writeMs)
			c.snaps[k] = offset
		} else {
			pe.updates++
		}
		pe.p.apply(v.start, v.batches)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("share: replay __share_group_state: %w", err)
	}
	c.armCold()
	return c, nil
}

// entry returns group's entry, made if need be. c.mu is held (or c is not
// shared yet).
func (c *Coordinator) entry(id string) *groupEntry {
	ge := c.groups[id]
	if ge == nil {
		ge = &groupEntry{id: id, g: newGroup(id), sessions: map[string]*armed{}, parts: map[TopicPartition]*partEntry{}}
		c.groups[id] = ge
	}
	return ge
}

// lookup returns group's entry; create makes it. ErrClosed after Close.
func (c *Coordinator) lookup(id string, create bool) (*groupEntry, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidGroup)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if ge := c.groups[id]; ge != nil || !create {
		if ge == nil {
			return nil, fmt.Errorf("%w: share group %q", ErrGroupNotFound, id)
		}
		return ge, nil
	}
	return c.entry(id), nil
}

// partitionConfig is group's share-partition settings. c.mu is held (or
// c is not shared yet).
func (c *Coordinator) partitionConfig(group string) PartitionConfig {
	pc := c.cfg.Partition
	gc := c.configs[group]
	if gc.LockDuration > 0 {
		pc.LockDuration = gc.LockDuration
	}
	if gc.DeliveryCountLimit > 0 {
		pc.DeliveryCountLimit = gc.DeliveryCountLimit
	}
	return pc
}

func (c *Coordinator) offsetReset(group string) OffsetReset {
	if r, err := ParseOffsetReset(c.configs[group].AutoOffsetReset); err == nil {
		return r
	}
	return c.cfg.AutoOffsetReset
}

// Close stops the timers and waits for their callbacks. Later calls get
// ErrClosed. What was acknowledged is in the StateLog already.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	groups := slices.Collect(maps.Values(c.groups))
	if c.cold != nil && c.cold.stop.Stop() {
		c.callbacks.Done()
	}
	c.cold = nil
	c.mu.Unlock()
	for _, ge := range groups {
		ge.mu.Lock()
		for _, a := range ge.sessions {
			if a.stop.Stop() {
				c.callbacks.Done()
			}
		}
		clear(ge.sessions)
		parts := slices.Collect(maps.Values(ge.parts))
		ge.mu.Unlock()
		for _, pe := range parts {
			pe.mu.Lock()
			if pe.timer != nil && pe.timer.stop.Stop() {
				c.callbacks.Done()
			}
			pe.timer = nil
			pe.mu.Unlock()
		}
	}
	c.callbacks.Wait()
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// afterFunc arms f at at and returns its timer; nil once closed. f gets
// the timer, to tell whether it is still the one its holder armed.
func (c *Coordinator) afterFunc(at time.Time, f func(*armed)) *armed {
	c.mu.Lock() // a leaf here: held for nothing else
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.callbacks.Add(1)
	c.mu.Unlock()
	a := &armed{at: at}
	a.stop = c.clock.AfterFunc(at.Sub(c.clock.Now()), func() {
		defer c.callbacks.Done()
		f(a)
	})
	return a
}
