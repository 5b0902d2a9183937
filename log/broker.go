package log

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	stdlog "log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/timingwheel"
	"github.com/strata-log/strata/vfs"
)

// Files of the data dir besides the partition directories.
const (
	lockFile      = ".lock"
	cleanShutdown = ".strata_cleanshutdown"
	topicsFile    = "topics.json"
	topicsVersion = 1
)

// Broker is a standalone node: the topics of one data directory.
type Broker struct {
	dir    string
	cfg    Config
	fs     vfs.FS
	logger *stdlog.Logger
	lock   io.Closer

	mu     sync.RWMutex // guards topics and closed; held to write topics.json
	topics map[string]*Topic
	closed bool

	wheel   *timingwheel.TimingWheel
	fetches *timingwheel.Purgatory[TopicPartition]
	groups  *group.Coordinator
	cleaner *cleaner // log compaction

	ckptMu sync.Mutex        // serializes checkpoint writes
	ckpts  map[string]string // checkpoint file → contents last written

	wakeCh chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Topic is a named set of partitions.
type Topic struct {
	name  string
	cfg   TopicConfig
	parts []*Partition
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
}

// Open opens (creating if needed) the data directory dir and the topics in
// it. A second Open of the same directory, in this process or another, fails
// with ErrDirInUse until the first Broker is closed. After an unclean
// shutdown, the partitions are recovered: torn and corrupt tails are cut off
// and the indexes rebuilt.
func Open(dir string, cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.DefaultTopic.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("log: default topic config: %w", err)
	}
	fs := cfg.FS
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: open data dir: %w", err)
	}
	if fi, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("log: open data dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("log: open data dir: %s is not a directory", dir)
	}
	lock, err := fs.Lock(filepath.Join(dir, lockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrDirInUse, dir)
	} else if err != nil {
		return nil, fmt.Errorf("log: lock data dir: %w", err)
	}
	b := &Broker{
		dir:    dir,
		cfg:    cfg,
		fs:     fs,
		logger: cfg.Logger,
		lock:   lock,
		topics: map[string]*Topic{},
		wakeCh: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	if err := b.startPurgatory(); err != nil {
		lock.Close()
		return nil, err
	}
	err = b.load()
	if err == nil {
		err = b.startGroups()
	}
	if err != nil {
		for _, t := range b.topics {
			for _, p := range t.parts {
				p.close()
			}
		}
		b.wheel.Stop()
		lock.Close()
		return nil, err
	}
	b.cleaner = newCleaner(b)
	b.wg.Add(2)
	go b.loop()
	go b.cleanerLoop()
	return b, nil
}

// load reads topics.json and opens every partition.
func (b *Broker) load() error {
	_, err := b.fs.Stat(filepath.Join(b.dir, cleanShutdown))
	clean := err == nil
	meta := topicsMeta{Topics: map[string]TopicConfig{}}
	data, err := vfs.ReadFile(b.fs, filepath.Join(b.dir, topicsFile))
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
	rps, err := readCheckpoint(b.fs, filepath.Join(b.dir, recoveryPointFile))
	if err != nil {
		b.logger.Warn("ignoring unreadable checkpoint: recovering every segment", "err", err)
		rps, clean = map[TopicPartition]int64{}, false
	}
	starts, err := readCheckpoint(b.fs, filepath.Join(b.dir, logStartFile))
	if err != nil {
		b.logger.Warn("ignoring unreadable checkpoint", "err", err)
		starts = map[TopicPartition]int64{}
	}
	if !clean {
		b.logger.Info("unclean shutdown: recovering partitions", "dir", b.dir)
	}
	for name, cfg := range meta.Topics {
		if ValidTopicName(name) != nil {
			return fmt.Errorf("log: %s: %w", topicsFile, ValidTopicName(name))
		}
		t := &Topic{name: name, cfg: cfg}
		b.topics[name] = t
		for i := 0; i < cfg.Partitions; i++ {
			p := newPartition(b, name, i, cfg)
			st := partitionState{recoveryPoint: -1, startOffset: -1}
			if off, ok := rps[TopicPartition{Topic: name, Partition: i}]; ok {
				st.recoveryPoint = off
			}
			if off, ok := starts[TopicPartition{Topic: name, Partition: i}]; ok {
				st.startOffset = off
			}
			if err := p.load(clean, st); err != nil {
				return err
			}
			t.parts = append(t.parts, p)
		}
	}
	if err := b.removeStrays(); err != nil {
		return err
	}
	// From here on, a crash is unclean again.
	if clean {
		if err := b.fs.Remove(filepath.Join(b.dir, cleanShutdown)); err != nil {
			return fmt.Errorf("log: remove clean-shutdown marker: %w", err)
		}
		if err := b.fs.SyncDir(b.dir); err != nil {
			return fmt.Errorf("log: sync dir %s: %w", b.dir, err)
		}
	}
	return nil
}

// removeStrays deletes partition directories of no known topic: what a crash
// in the middle of CreateTopic or DeleteTopic leaves.
func (b *Broker) removeStrays() error {
	names, err := b.fs.ReadDir(b.dir)
	if err != nil {
		return fmt.Errorf("log: read data dir: %w", err)
	}
	removed := false
	for _, name := range names {
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		part, err := strconv.Atoi(name[i+1:])
		topic := name[:i]
		if err != nil || part < 0 || ValidTopicName(topic) != nil {
			continue
		}
		if t, ok := b.topics[topic]; ok && part < len(t.parts) {
			continue
		}
		if fi, err := b.fs.Stat(filepath.Join(b.dir, name)); err != nil || !fi.IsDir() {
			continue
		}
		b.logger.Info("removing partition directory of no topic", "dir", name)
		if err := b.fs.RemoveAll(filepath.Join(b.dir, name)); err != nil {
			return fmt.Errorf("log: remove stray %s: %w", name, err)
		}
		removed = true
	}
	if removed {
		return b.fs.SyncDir(b.dir)
	}
	return nil
}

// writeTopics writes topics.json atomically. Holds b.mu.
func (b *Broker) writeTopics() error {
	meta := topicsMeta{Version: topicsVersion, Topics: make(map[string]TopicConfig, len(b.topics))}
	for name, t := range b.topics {
		meta.Topics[name] = t.cfg
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(b.fs, filepath.Join(b.dir, topicsFile), data)
}

// CreateTopic creates a topic. Zero fields of cfg take the broker's
// DefaultTopic and then Kafka's defaults. A standalone broker has one replica
// of everything: a ReplicationFactor above 1 is ErrInvalidConfig.
func (b *Broker) CreateTopic(name string, cfg TopicConfig) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, err
	}
	if name == OffsetsTopic {
		return nil, fmt.Errorf("%w: %s is internal", ErrInvalidTopic, name)
	}
	cfg = cfg.merge(b.cfg.DefaultTopic).WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReplicationFactor > 1 {
		return nil, fmt.Errorf("%w: replication factor %d on a standalone broker", ErrInvalidConfig, cfg.ReplicationFactor)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("log: create topic %s: %w", name, ErrClosed)
	}
	return b.createTopicLocked(name, cfg)
}

// createTopicLocked creates a topic from a complete, valid cfg. Holds b.mu.
func (b *Broker) createTopicLocked(name string, cfg TopicConfig) (*Topic, error) {
	if _, ok := b.topics[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	t := &Topic{name: name, cfg: cfg}
	fail := func(err error) (*Topic, error) {
		for _, p := range t.parts {
			p.close()
			b.fs.RemoveAll(p.dir)
		}
		return nil, fmt.Errorf("log: create topic %s: %w", name, err)
	}
	for i := 0; i < cfg.Partitions; i++ {
		p := newPartition(b, name, i, cfg)
		// A directory left by a crash before its topic was recorded.
		if err := b.fs.RemoveAll(p.dir); err != nil {
			return fail(err)
		}
		if err := p.create(); err != nil {
			return fail(err)
		}
		t.parts = append(t.parts, p)
	}
	if err := b.fs.SyncDir(b.dir); err != nil {
		return fail(err)
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
		if name != OffsetsTopic {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// DeleteTopic deletes a topic and its data. Appends and reads in flight on
// its partitions end with ErrClosed.
func (b *Broker) DeleteTopic(name string) error {
	if err := ValidTopicName(name); err != nil {
		return err
	}
	if name == OffsetsTopic {
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
	if err := b.writeTopics(); err != nil {
		b.topics[name] = t
		return fmt.Errorf("log: delete topic %s: %w", name, err)
	}
	for _, p := range t.parts {
		p.close()
		b.appended(p) // parked fetches re-read, and find the partition gone
		if err := b.fs.RemoveAll(p.dir); err != nil {
			b.logger.Warn("delete topic: files left behind (removed at next open)", "dir", p.dir, "err", err)
		}
	}
	if err := b.fs.SyncDir(b.dir); err != nil {
		return fmt.Errorf("log: delete topic %s: %w", name, err)
	}
	return nil
}

// partitions returns every partition. Holds no lock on return.
func (b *Broker) partitions() []*Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var ps []*Partition
	for _, t := range b.topics {
		ps = append(ps, t.parts...)
	}
	return ps
}

// Close flushes every partition, writes the checkpoints and the clean-shutdown
// marker, stops the background work and releases the data dir. Further calls
// on the broker and its topics get ErrClosed.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
	b.groups.Close()

	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, p := range b.partitions() {
		keep(p.close())
	}
	b.wheel.Stop()
	keep(b.writeCheckpoints())
	if first == nil {
		// Only a fully flushed broker is clean.
		f, err := b.fs.Create(filepath.Join(b.dir, cleanShutdown))
		if err == nil {
			keep(f.Sync())
			keep(f.Close())
			keep(b.fs.SyncDir(b.dir))
		} else {
			keep(err)
		}
	}
	keep(b.lock.Close())
	return first
}

// writeCheckpoints writes the recovery points and log start offsets.
func (b *Broker) writeCheckpoints() error {
	rps := map[TopicPartition]int64{}
	starts := map[TopicPartition]int64{}
	for _, p := range b.partitions() {
		tp := TopicPartition{Topic: p.topic, Partition: p.id}
		rps[tp] = p.checkpointRecoveryPoint()
		starts[tp] = p.StartOffset()
	}
	b.ckptMu.Lock()
	defer b.ckptMu.Unlock()
	if b.ckpts == nil {
		b.ckpts = map[string]string{}
	}
	for _, c := range []struct {
		name    string
		offsets map[TopicPartition]int64
	}{{recoveryPointFile, rps}, {logStartFile, starts}} {
		data := formatCheckpoint(c.offsets)
		if b.ckpts[c.name] == string(data) {
			continue // unchanged since this broker last wrote it
		}
		if err := writeCheckpoint(b.fs, filepath.Join(b.dir, c.name), data); err != nil {
			return err
		}
		b.ckpts[c.name] = string(data)
	}
	return nil
}

func (b *Broker) wakeLoop() {
	select {
	case b.wakeCh <- struct{}{}:
	default:
	}
}

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }

// Dir is the broker's data directory.
func (b *Broker) Dir() string { return b.dir }
