package log

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/timingwheel"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/vfs"
)

// Files of the data dir besides the partition directories.
const (
	lockFile      = ".lock"
	cleanShutdown = ".strata_cleanshutdown"
	topicsFile    = "topics.json"
	topicsVersion = 1
)

// Broker is a standalone node: the topics of one data directory. It is a
// front end on a Store, which owns the partitions: the Broker keeps the
// topics and their configurations (topics.json), the consumer groups and
// the long polls.
type Broker struct {
	dir        string
	topicsPath string // dir/topics.json
	cfg        Config
	fs         vfs.FS
	logger     *slog.Logger
	store      *Store

	mu     sync.RWMutex // guards topics and closed; held to write topics.json
	topics map[string]*Topic
	closed bool

	wheel   *timingwheel.TimingWheel
	fetches *timingwheel.Purgatory[TopicPartition]
	purgMu  sync.Mutex // orders the purgatory sizes told to cfg.Metrics
	groups  *group.Coordinator
	shares  *share.Coordinator // share groups (broker_share.go)
	txn     *txnHost           // the transaction coordinator (broker_txn.go)
	cleaner *cleaner           // log compaction
	// The cleaner's goroutine starts with the store's loop (startCleaner);
	// cleanerMu guards its start against Close, which closes stop under it.
	cleanerMu                            sync.Mutex
	cleanerReady, cleanerWant, cleanerOn bool

	// ephemeral: opened by OpenEphemeral, for a data dir thrown away after
	// Close: no topics.json, and Close is Discard.
	ephemeral bool

	acls   *aclStore   // acls.json (acls.go)
	scram  *scramStore // scram.json (scram.go)
	quotas *quotaStore // quotas.json (quota_store.go)

	dyn atomic.Pointer[dynamicDefaults] // broker-configs.json (broker_admin_defaults.go)

	pidMu sync.Mutex           // guards pids
	pids  *ProducerIDAllocator // opened by the first InitProducerID

	stop chan struct{}  // closed by Close: parked fetches and the cleaner end
	wg   sync.WaitGroup // the cleaner's goroutine
}

// Topic is a named set of partitions.
type Topic struct {
	name  string
	cfg   TopicConfig
	parts []*Partition
	// overrides are the fields of cfg set on the topic itself (given to
	// CreateTopic or AlterTopicConfig); zero fields follow the defaults.
	// A Topic is never changed once published: CreatePartitions and
	// AlterTopicConfig replace it (broker_admin.go).
	overrides TopicConfig
}

// Name is the topic's name.
func (t *Topic) Name() string { return t.name }

// Partitions is the number of partitions.
func (t *Topic) Partitions() int { return len(t.parts) }

// Config is the topic's configuration, defaults applied.
func (t *Topic) Config() TopicConfig { return t.cfg }

// Partition returns partition i.
func (t *Topic) Partition(i int) (*Partition, error) {
	if i < 0 || i >= len(t.parts) {
		return nil, fmt.Errorf("%w: %s has %d partitions, not %d", ErrUnknownPartition, t.name, len(t.parts), i)
	}
	return t.parts[i], nil
}

// topicsMeta is topics.json: the topics and their configurations.
type topicsMeta struct {
	Version int                    `json:"version"`
	Topics  map[string]TopicConfig `json:"topics"`
	// Overrides are the configs set on each topic (Topic.overrides); a
	// topic missing here has none (files written before they were kept).
	Overrides map[string]TopicConfig `json:"overrides,omitempty"`
}

// Open opens (creating if needed) the data directory dir and the topics in
// it. A second Open of the same directory, in this process or another, fails
// with ErrDirInUse until the first Broker is closed. After an unclean
// shutdown, the partitions are recovered: torn and corrupt tails are cut off
// and the indexes rebuilt.
func Open(dir string, cfg Config) (*Broker, error) { return open(dir, cfg, false) }

// open is Open and OpenEphemeral.
func open(dir string, cfg Config, ephemeral bool) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.DefaultTopic.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("log: default topic config: %w", err)
	}
	if err := cfg.validateTxn(); err != nil {
		return nil, err
	}
	if ephemeral {
		cfg.FS = unsyncedDirs{cfg.FS}
	}
	b := &Broker{
		dir:        dir,
		topicsPath: filepath.Join(dir, topicsFile),
		cfg:        cfg,
		fs:         cfg.FS,
		logger:     cfg.Logger,
		topics:     map[string]*Topic{},
		stop:       make(chan struct{}),
		ephemeral:  ephemeral,
	}
	if err := b.startPurgatory(); err != nil {
		return nil, err
	}
	store, err := OpenStore(dir, StoreConfig{
		RetentionCheckInterval:  cfg.RetentionCheckInterval,
		CheckpointInterval:      cfg.CheckpointInterval,
		FS:                      cfg.FS,
		Logger:                  cfg.Logger,
		Clock:                   cfg.Clock,
		HighWatermarkFollowsEnd: true, // the only replica: what it appends is committed
		Notify:                  b.appended,
		Metrics:                 cfg.Metrics,
		OnLoopStart:             b.startCleaner,
		MaxDecompressedBytes:    cfg.MaxDecompressedBytes,
		ephemeral:               ephemeral,
		keepAsides:              true, // load reads them, then removes them
	})
	if err != nil {
		b.wheel.Stop()
		return nil, err
	}
	b.store = store
	dynFound, err := b.openDynamicDefaults()
	if err == nil && !store.fresh { // a new data dir has no topics.json and no stray
		err = b.load()
	}
	if err == nil && dynFound {
		b.applyDynamicDefaults()
	}
	if err == nil {
		b.acls, err = openACLStore(b.fs, dir)
	}
	if err == nil {
		b.scram, err = openSCRAMStore(b.fs, dir)
	}
	if err == nil {
		b.quotas, err = openQuotaStore(b.fs, dir)
	}
	if err == nil {
		err = b.startGroups()
	}
	if err == nil {
		err = b.startShares()
	}
	if err != nil {
		store.close(false)
		b.wheel.Stop()
		return nil, err
	}
	b.startTxn()
	b.cleaner = newCleaner(b)
	b.cleanerReadyToStart()
	return b, nil
}

// load reads topics.json, opens every partition of every topic, finishes
// the deletions a crash interrupted and removes the partition directories
// of no topic.
func (b *Broker) load() error {
	meta := topicsMeta{Topics: map[string]TopicConfig{}}
	data, err := vfs.ReadFile(b.fs, b.topicsPath)
	switch {
	case isNotExist(err):
	case err != nil:
		return fmt.Errorf("log: read %s: %w", topicsFile, err)
	default:
		if err := json.Unmarshal(data, &meta); err != nil {
			return fmt.Errorf("log: %s: %w", topicsFile, err)
		}
		if meta.Version != topicsVersion {
			return fmt.Errorf("log: %s: unknown version %d", topicsFile, meta.Version)
		}
	}
	dirs, err := b.store.PartitionDirs()
	if err != nil {
		return err
	}
	var deleting []string
	for name, cfg := range meta.Topics {
		if ValidTopicName(name) != nil {
			return fmt.Errorf("log: %s: %w", topicsFile, ValidTopicName(name))
		}
		if b.deletionInterrupted(name, cfg.Partitions, dirs) {
			deleting = append(deleting, name)
			continue
		}
		t := &Topic{name: name, cfg: cfg, overrides: meta.Overrides[name]}
		b.topics[name] = t
		for i := 0; i < cfg.Partitions; i++ {
			p, err := b.store.OpenPartition(name, i, cfg)
			if err != nil {
				return err
			}
			t.parts = append(t.parts, p)
		}
	}
	b.deriveMissingOverrides(meta)
	if len(deleting) > 0 {
		sort.Strings(deleting)
		b.logger.Info("finishing topic deletions a crash interrupted", "topics", deleting)
		if err := b.writeTopics(); err != nil {
			return fmt.Errorf("log: finish deleting %v: %w", deleting, err)
		}
	}
	// Their directories left are strays now, and their asides go with
	// the others.
	b.removeStrays(dirs)
	return b.store.finishRemovals()
}

// deletionInterrupted reports whether a DeleteTopic of the named topic,
// listed in topics.json with n partitions, was cut short by a crash: it
// moves every partition directory aside before it rewrites topics.json, so
// a partition whose directory is missing and whose aside is there was
// being deleted. (A partition directory missing without an aside is
// created empty, as a lost disk would be.)
func (b *Broker) deletionInterrupted(name string, n int, dirs []TopicPartition) bool {
	for i := range n {
		k := TopicPartition{Topic: name, Partition: i}
		if _, found := slices.BinarySearchFunc(dirs, k, tp.Compare); !found && b.store.hasAside(name, i) {
			return true
		}
	}
	return false
}

// removeStrays deletes the partition directories, among dirs, of no known
// topic: what a crash in the middle of CreateTopic or DeleteTopic leaves.
// The broker owns the partitions of its data dir, so this is its decision,
// not the store's. One it cannot remove stays, with a warning: it never
// stops the data dir from opening, and a CreateTopic of its name tries
// again.
func (b *Broker) removeStrays(dirs []TopicPartition) {
	for _, tp := range dirs {
		if t, ok := b.topics[tp.Topic]; ok && tp.Partition < len(t.parts) {
			continue
		}
		b.logger.Info("removing partition directory of no topic", "topic", tp.Topic, "partition", tp.Partition)
		if err := b.store.RemovePartition(tp.Topic, tp.Partition); err != nil {
			b.logger.Warn("could not remove partition directory of no topic; leaving it", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			// No partition opens from it: it is not to be recovered
			// either, or no shutdown would be clean again.
			b.store.leaveUnopened(tp)
		}
	}
}

// writeTopics writes topics.json atomically; an ephemeral broker writes
// none. Holds b.mu.
func (b *Broker) writeTopics() error {
	if b.ephemeral {
		return nil // no Open will read it
	}
	data, err := b.appendTopicsJSON(nil)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(b.fs, b.topicsPath, data)
}

// appendTopicsJSON appends topics.json, a topicsMeta: the topics sorted by
// name, one a line (json.MarshalIndent of the whole, which spread every
// config field over a line of its own, cost most of a CreateTopic on the
// in-memory FS). Holds b.mu.
func (b *Broker) appendTopicsJSON(buf []byte) ([]byte, error) {
	names := make([]string, 0, len(b.topics))
	for name := range b.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	buf = append(buf, "{\n  \"version\": "...)
	buf = strconv.AppendInt(buf, topicsVersion, 10)
	buf = append(buf, ",\n  \"topics\": {"...)
	for i, name := range names {
		cfg, err := json.Marshal(b.topics[name].cfg)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		// A valid topic name ([a-zA-Z0-9._-]) is a JSON string as it is.
		buf = append(buf, "\n    \""...)
		buf = append(buf, name...)
		buf = append(buf, "\": "...)
		buf = append(buf, cfg...)
	}
	buf = append(buf, "\n  }"...)
	return appendOverridesJSON(buf, names, b.topics)
}

// CreateTopic creates a topic. Zero fields of cfg take the broker's
// DefaultTopic and then Kafka's defaults. A standalone broker has one replica
// of everything: a ReplicationFactor above 1 is ErrInvalidReplicationFactor
// (an ErrInvalidConfig). The non-zero fields of cfg other than Partitions
// and ReplicationFactor are the topic's overrides (TopicOverrides).
func (b *Broker) CreateTopic(name string, cfg TopicConfig) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, err
	}
	if internalTopic(name) {
		return nil, fmt.Errorf("%w: %s is internal", ErrInvalidTopic, name)
	}
	overrides := topicOverrides(cfg)
	cfg = cfg.merge(b.topicDefaults()).WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReplicationFactor > 1 {
		return nil, fmt.Errorf("%w: replication factor %d on a standalone broker", ErrInvalidReplicationFactor, cfg.ReplicationFactor)
	}
	if _, err := partitionDirName(name, cfg.Partitions-1); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("log: create topic %s: %w", name, ErrClosed)
	}
	return b.createTopicWith(name, cfg, overrides)
}

// createTopicLocked creates a topic from a complete, valid cfg. Holds b.mu.
func (b *Broker) createTopicLocked(name string, cfg TopicConfig) (*Topic, error) {
	return b.createTopicWith(name, cfg, TopicConfig{})
}

// createTopicWith creates a topic from a complete, valid cfg, of which
// overrides were set on the topic. Holds b.mu.
func (b *Broker) createTopicWith(name string, cfg, overrides TopicConfig) (*Topic, error) {
	if _, ok := b.topics[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	t := &Topic{name: name, cfg: cfg, overrides: overrides}
	fail := func(err error) (*Topic, error) {
		for _, p := range t.parts {
			b.store.RemovePartition(p.topic, p.id)
		}
		return nil, fmt.Errorf("log: create topic %s: %w", name, err)
	}
	for i := 0; i < cfg.Partitions; i++ {
		p, err := b.store.CreatePartition(name, i, cfg)
		if errors.Is(err, ErrPartitionExists) {
			// A directory left by a crash before its topic was recorded
			// (or a partition made through the Store): removed, and the
			// partition created anew. Checked by the failed create, so
			// that a new partition costs no look-up of a leftover.
			if err = b.store.RemovePartition(name, i); err == nil || errors.Is(err, ErrUnknownPartition) {
				p, err = b.store.CreatePartition(name, i, cfg)
			}
		}
		if err != nil {
			return fail(err)
		}
		t.parts = append(t.parts, p)
	}
	b.topics[name] = t
	if err := b.writeTopics(); err != nil {
		delete(b.topics, name)
		return fail(err)
	}
	return t, nil
}

// Topic returns the named topic.
func (b *Broker) Topic(name string) (*Topic, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, fmt.Errorf("log: topic %s: %w", name, ErrClosed)
	}
	t, ok := b.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return t, nil
}

// Partition returns partition i of the named topic.
func (b *Broker) Partition(topic string, i int) (*Partition, error) {
	t, err := b.Topic(topic)
	if err != nil {
		return nil, err
	}
	return t.Partition(i)
}

// Topics returns the names of the topics, sorted; internal topics
// (OffsetsTopic) are not listed.
func (b *Broker) Topics() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.topics))
	for name := range b.topics {
		if !internalTopic(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// DeleteTopic deletes a topic and its data. Appends and reads in flight on
// its partitions end with ErrClosed.
//
// Its partition directories are moved aside (renamed, then the data dir
// fsynced) before topics.json is rewritten without it, and removed after:
// a crash before the rewrite leaves the topic listed with directories
// moved aside, and the next Open finishes the deletion; a crash after it
// leaves asides or directories of no topic, which the next Open removes.
// Once its partitions are closed the deletion goes on: an error moving a
// directory or writing topics.json is returned, and the next Open
// finishes what is left.
func (b *Broker) DeleteTopic(name string) error {
	if err := ValidTopicName(name); err != nil {
		return err
	}
	if internalTopic(name) {
		return fmt.Errorf("%w: %s is internal", ErrInvalidTopic, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("log: delete topic %s: %w", name, ErrClosed)
	}
	t, ok := b.topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	delete(b.topics, name)
	asides, moveErr := b.store.moveAsideAll(t.parts)
	if err := b.writeTopics(); err != nil {
		return fmt.Errorf("log: delete topic %s: %w (the next open finishes it)", name, err)
	}
	for _, aside := range asides {
		if err := b.store.removeAside(aside); err != nil && moveErr == nil {
			moveErr = err
		}
	}
	if moveErr != nil {
		return fmt.Errorf("log: delete topic %s: %w (the next open removes what is left)", name, moveErr)
	}
	return nil
}

// Close flushes every partition, writes the checkpoints and the clean-shutdown
// marker, stops the background work and releases the data dir. Further calls
// on the broker and its topics get ErrClosed. The Close of a broker opened
// by OpenEphemeral is Discard.
func (b *Broker) Close() error {
	if b.ephemeral {
		return b.Discard()
	}
	return b.shutdown(b.store.Close)
}

// shutdown is Close and Discard: closeStore closes the store.
func (b *Broker) shutdown(closeStore func() error) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cleanerMu.Lock() // no cleaner starts after this
	close(b.stop)
	b.cleanerMu.Unlock()
	b.wg.Wait()  // the cleaner, before the partitions it cleans close
	b.closeTxn() // its markers go through the groups and the partitions
	b.closeShares()
	b.groups.Close()
	err := closeStore()
	b.wheel.Stop()
	return err
}

// Store is the partition layer under the broker, for code that serves its
// partitions (a Kafka-protocol server, tools). Partitions created or
// removed through it bypass topics.json: the next Open removes the
// directories of partitions of no topic.
func (b *Broker) Store() *Store { return b.store }

// enforceRetention runs retention on every partition now.
func (b *Broker) enforceRetention(now time.Time) { b.store.enforceRetention(now) }

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }

// Dir is the broker's data directory.
func (b *Broker) Dir() string { return b.dir }
