package log

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/vfs"
)

// ErrPartitionExists is returned by Store.CreatePartition for a partition
// that is open or whose directory exists.
var ErrPartitionExists = errors.New("log: partition already exists")

// defaultMaxOpenSegments is StoreConfig.MaxOpenSegments's default: 1000
// (3000 descriptors at most for sealed segments, far below the limit Go
// raises a process's soft limit to on Linux), or a tenth of the soft limit
// on open files if that is less (at least 16): sealed segments then take
// at most 30% of the descriptors.
func defaultMaxOpenSegments() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/10 < 1000 {
		return max(int(lim.Cur/10), 16)
	}
	return 1000
}

// deletedSuffix marks a partition directory that RemovePartition renamed
// aside (asideName) before removing it: a crash in the middle of the
// removal leaves it, and the next open finishes the job.
const deletedSuffix = ".deleted"

// maxNameLen is the longest name of a directory entry the file systems
// Strata runs on allow, in bytes (NAME_MAX). Every directory name derived
// from a topic name must fit: Kafka's 249 characters leave room for
// "-" and a partition number up to 99999.
const maxNameLen = 255

// asideTagLen is the length of the random tag of an aside name, in hex.
const asideTagLen = 16

// asideName is the name the directory of partition id of topic is renamed
// to before RemovePartition removes it: <topic>-<id>.<tag>.deleted, tag 16
// hex digits that keep the names of two removals apart, the topic cut
// short if the whole would not fit in maxNameLen bytes (Kafka names its
// <topic>-<partition>.<uuid>-delete directories the same way).
func asideName(topic string, id int, tag uint64) string {
	suffix := fmt.Sprintf("-%d.%0*x%s", id, asideTagLen, tag, deletedSuffix)
	if len(topic)+len(suffix) > maxNameLen {
		topic = topic[:maxNameLen-len(suffix)]
	}
	return topic + suffix
}

// isAsideOf reports whether name, an entry of the data dir, is an aside
// name of partition id of topic (asideName with any tag).
func isAsideOf(name, topic string, id int) bool {
	rest, ok := strings.CutSuffix(name, deletedSuffix)
	if !ok || len(rest) < asideTagLen+1 || rest[len(rest)-asideTagLen-1] != '.' {
		return false
	}
	tag, err := strconv.ParseUint(rest[len(rest)-asideTagLen:], 16, 64)
	return err == nil && asideName(topic, id, tag) == name
}

// partitionDirName is the name of the directory of partition id of topic,
// or ErrInvalidPartitions if it would not fit in maxNameLen bytes (a topic
// name of 249 characters can have 100,000 partitions).
func partitionDirName(topic string, id int) (string, error) {
	name := topic + "-" + strconv.Itoa(id)
	if len(name) > maxNameLen {
		return "", fmt.Errorf("%w: %s cannot have a partition %d: the directory name %s passes %d bytes", ErrInvalidPartitions, topic, id, name, maxNameLen)
	}
	return name, nil
}

// StoreConfig configures a Store. The zero value means the defaults.
type StoreConfig struct {
	// RetentionCheckInterval is how often retention runs; 0 → 5 minutes.
	RetentionCheckInterval time.Duration
	// CheckpointInterval is how often the checkpoints are written; 0 → 60
	// s. They are always written on Close.
	CheckpointInterval time.Duration
	// FS is the file system; nil → the operating system's.
	FS vfs.FS
	// Logger receives the store's log lines; nil → discard.
	Logger *slog.Logger
	// HighWatermarkFollowsEnd makes every partition's high watermark its
	// end offset: the store holds the only replica (a standalone broker).
	// A cluster member leaves it false and moves each high watermark with
	// Partition.SetHighWatermark.
	HighWatermarkFollowsEnd bool
	// Notify, when set, is called after every append to a partition, every
	// move of its high watermark and its removal; parked fetches wake on it.
	// It must not block and must not call back into the partition's writer
	// path.
	Notify func(*Partition)
	// OnLoopStart, when set, is called once, when the store's background
	// loop starts: at the first append, roll or partition opened from disk
	// (an owner starts its own background work with it). It must not block
	// and must not call back into the store.
	OnLoopStart func()
	// ProducerIDExpirationCheckInterval is how often idle idempotent
	// producers are expired (TopicConfig.ProducerIDExpiration); 0 → 10
	// minutes (Kafka's producer.id.expiration.check.interval.ms).
	ProducerIDExpirationCheckInterval time.Duration
	// Clock is the store's time (rolls, retention, flushes, checkpoints,
	// producer expiry); nil → clock.System().
	Clock clock.Clock
	// Metrics, when set, is told of every partition flush and its time
	// (metrics.Hooks.Fsync); nil → none.
	Metrics metrics.Hooks
	// MaxOpenSegments bounds the sealed segments, across the store's
	// partitions, whose files are open (three descriptors each): the files
	// of idle ones are closed, least recently read first, and opened again
	// by the next read. Sealed segments of a cleanly closed log are opened
	// lazily, as Kafka's LazyIndex opens indexes. Active segments are not
	// counted. 0 → 1000, or a tenth of the process's limit on open files
	// if that is less.
	MaxOpenSegments int
	// MaxDecompressedBytes bounds what the records of one compressed batch
	// may decompress to in the partitions' validation, recompression and
	// reads (Config.MaxDecompressedBytes); 0 → 128 MiB
	// (batch.DefaultMaxDecompressed).
	MaxDecompressedBytes int

	// ephemeral: the owner throws the data dir away after Close
	// (OpenEphemeral): partitions skip the files only a later open
	// reads (their leader-epoch checkpoint).
	ephemeral bool
	// keepAsides: open leaves the directories of removals a crash
	// interrupted (asides) for the owner, who looks at them (hasAside)
	// and then calls finishRemovals; without it open removes them.
	keepAsides bool
}

func (c StoreConfig) withDefaults() StoreConfig {
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = 5 * time.Minute
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = time.Minute
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.ProducerIDExpirationCheckInterval <= 0 {
		c.ProducerIDExpirationCheckInterval = 10 * time.Minute
	}
	if c.MaxOpenSegments <= 0 {
		c.MaxOpenSegments = defaultMaxOpenSegments()
	}
	if c.MaxDecompressedBytes <= 0 {
		c.MaxDecompressedBytes = batch.DefaultMaxDecompressed
	}
	return c
}

// Store owns the partition directories of one data directory
// (<dir>/<topic>-<partition>): it creates, opens and removes partitions as
// its owner asks, runs their flush and retention in one background
// goroutine, and writes the data dir's checkpoints (recovery points, log
// start offsets, high watermarks). It knows nothing of topics: its owner —
// the standalone Broker, or a cluster member — decides which partitions
// exist and with which configuration. Partitions need not be dense or all
// present, and the Store never deletes a directory it was not asked to
// remove (PartitionDirs lists them for the owner to decide).
type Store struct {
	dir    string
	cfg    StoreConfig
	fs     vfs.FS
	logger *slog.Logger
	lock   io.Closer
	// clean: the last shutdown was clean, so partitions open without
	// recovery. Nothing has written to a partition since then that was not
	// opened through this Store.
	clean bool
	// fresh: at open the data dir held nothing but the lock (a new one):
	// there is no file for the owner to read back either.
	fresh bool

	mu    sync.RWMutex // guards parts, saved, unrecovered and closed
	parts map[TopicPartition]*Partition
	saved map[TopicPartition]partitionState // the checkpoints' word on partitions not open
	// unrecovered: after an unclean shutdown, the partition directories not
	// opened (so not recovered) or removed yet. Close marks the data dir
	// clean only when there are none: an unopened partition must still be
	// recovered by the next open.
	unrecovered map[TopicPartition]bool
	closed      bool
	// asides are the entries of the data dir that removals a crash
	// interrupted left (deletedSuffix), as open found them.
	asides []string

	tails tailBudget // the memory the partitions' tails hold (tail.go)
	// segFiles bounds the sealed segments whose files are open.
	segFiles *segment.Cache

	ckptMu sync.Mutex        // serializes checkpoint writes
	ckpts  map[string]string // checkpoint file → contents last written

	// roundMu is held by the background loop through each round of work;
	// a test holds it to keep the loop idle.
	roundMu sync.Mutex
	wakeCh  chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	// The loop starts lazily (startLoop): loopOn once it has; loopMu
	// guards the start and loopStopped, set by Close before it stops the
	// loop, after which it never starts.
	loopOn      atomic.Bool
	loopMu      sync.Mutex
	loopStopped bool
}

// OpenStore opens (creating if needed) the data directory dir and locks it
// (ErrDirInUse while another Store holds it). No partition is open yet:
// OpenPartition opens them. The background loop starts with the first
// partition that has records (see StoreConfig.OnLoopStart).
func OpenStore(dir string, cfg StoreConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	fs := cfg.FS
	// MkdirAll fails on a path that is not a directory (ENOTDIR): no Stat
	// is needed to tell.
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: open data dir: %w", err)
	}
	lock, err := fs.Lock(filepath.Join(dir, lockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrDirInUse, dir)
	} else if err != nil {
		return nil, fmt.Errorf("log: lock data dir: %w", err)
	}
	s := &Store{
		dir:    dir,
		cfg:    cfg,
		fs:     fs,
		logger: cfg.Logger,
		lock:   lock,
		parts:  map[TopicPartition]*Partition{},
		wakeCh: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	s.tails.max = defaultTailBudget
	s.segFiles = segment.NewCache(cfg.MaxOpenSegments)
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// load reads the clean-shutdown marker and the checkpoints, finishes
// removals a crash interrupted (or, keepAsides, notes them for the owner),
// and removes the marker: from here on a crash is unclean. One listing of
// the data dir tells it which of those files exist, so a new data dir
// (only the lock in it) costs one ReadDir.
func (s *Store) load() error {
	names, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("log: read data dir: %w", err)
	}
	_, s.clean = slices.BinarySearch(names, cleanShutdown)
	s.fresh = len(names) == 0 || len(names) == 1 && names[0] == lockFile
	read := func(name string) map[TopicPartition]int64 {
		if _, ok := slices.BinarySearch(names, name); !ok {
			return nil // none written yet: nothing to read
		}
		m, err := readCheckpoint(s.fs, filepath.Join(s.dir, name))
		if err != nil {
			s.logger.Warn("ignoring unreadable checkpoint", "err", err)
			if name == recoveryPointFile {
				s.clean = false // recover every segment
			}
			return nil
		}
		return m
	}
	rps, starts, hws := read(recoveryPointFile), read(logStartFile), read(highWatermarkFile)
	// saved and unrecovered stay nil while empty (a new data dir's).
	if n := max(len(rps), len(starts), len(hws)); n > 0 {
		s.saved = make(map[TopicPartition]partitionState, n)
	}
	state := func(tp TopicPartition) partitionState {
		st, ok := s.saved[tp]
		if !ok {
			st = partitionState{recoveryPoint: -1, startOffset: -1, highWatermark: -1}
		}
		return st
	}
	for tp, off := range rps {
		st := state(tp)
		st.recoveryPoint = off
		s.saved[tp] = st
	}
	for tp, off := range starts {
		st := state(tp)
		st.startOffset = off
		s.saved[tp] = st
	}
	for tp, off := range hws {
		st := state(tp)
		st.highWatermark = off
		s.saved[tp] = st
	}
	if !s.clean {
		dirs := s.partitionDirsIn(names)
		if len(dirs) > 0 {
			s.logger.Info("unclean shutdown: partitions will be recovered", "dir", s.dir)
			s.unrecovered = make(map[TopicPartition]bool, len(dirs))
		}
		for _, tp := range dirs {
			s.unrecovered[tp] = true
		}
	}
	for _, name := range names {
		if strings.HasSuffix(name, deletedSuffix) {
			s.asides = append(s.asides, name)
		}
	}
	if !s.cfg.keepAsides {
		if err := s.finishRemovals(); err != nil {
			return err
		}
	}
	if s.clean {
		if err := s.fs.Remove(filepath.Join(s.dir, cleanShutdown)); err != nil {
			return fmt.Errorf("log: remove clean-shutdown marker: %w", err)
		}
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("log: sync dir %s: %w", s.dir, err)
		}
	}
	return nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// partitionDir is the directory of a partition.
func (s *Store) partitionDir(topic string, id int) string {
	return filepath.Join(s.dir, topic+"-"+strconv.Itoa(id))
}

// checkNew validates a partition's name and configuration.
func checkNew(topic string, id int, cfg TopicConfig) (TopicConfig, error) {
	if err := ValidTopicName(topic); err != nil {
		return cfg, err
	}
	if id < 0 {
		return cfg, fmt.Errorf("%w: %s has no partition %d", ErrUnknownPartition, topic, id)
	}
	if _, err := partitionDirName(topic, id); err != nil {
		return cfg, err
	}
	cfg = cfg.WithDefaults()
	// Kafka's bounds are checked where a config enters (CreateTopic,
	// AlterTopicConfig): one on disk from before them opens all the same.
	if err := cfg.usable(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// CreatePartition creates a new, empty partition, durably (its directory,
// first segment and the data dir's entry are fsynced). A partition that is
// open, or whose directory exists, is ErrPartitionExists: the owner removes
// leftovers first if it wants them gone. Zero fields of cfg take the
// defaults.
func (s *Store) CreatePartition(topic string, id int, cfg TopicConfig) (*Partition, error) {
	cfg, err := checkNew(topic, id, cfg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("log: create partition %s-%d: %w", topic, id, ErrClosed)
	}
	tp := TopicPartition{Topic: topic, Partition: id}
	if _, ok := s.parts[tp]; ok {
		return nil, fmt.Errorf("%w: %s-%d is open", ErrPartitionExists, topic, id)
	}
	dir := s.partitionDir(topic, id)
	if _, err := s.fs.Stat(dir); err == nil {
		return nil, fmt.Errorf("%w: %s exists", ErrPartitionExists, dir)
	} else if !isNotExist(err) {
		return nil, fmt.Errorf("log: create partition %s-%d: %w", topic, id, err)
	}
	p := s.newPartition(topic, id, cfg)
	if err := p.create(); err != nil {
		s.fs.RemoveAll(dir)
		return nil, err
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		p.close()
		s.fs.RemoveAll(dir)
		return nil, fmt.Errorf("log: create partition %s-%d: %w", topic, id, err)
	}
	s.parts[tp] = p
	delete(s.saved, tp)
	delete(s.unrecovered, tp)
	return p, nil
}

// OpenPartition opens a partition from its directory, recovering it after
// an unclean shutdown (torn or corrupt tails cut off, indexes rebuilt), or
// creates it empty if the directory does not exist. An open partition is
// returned as it is. Zero fields of cfg take the defaults.
func (s *Store) OpenPartition(topic string, id int, cfg TopicConfig) (*Partition, error) {
	cfg, err := checkNew(topic, id, cfg)
	if err != nil {
		return nil, err
	}
	p, clamped, err := s.openPartition(topic, id, cfg)
	if err == nil {
		s.startLoop() // it may hold records due for retention or a flush
	}
	if err == nil && clamped {
		// The log lost records the checkpoint's high watermark covered: the
		// lower one is written at once, so that records appended again
		// under that offset are not taken as committed after another crash.
		err = s.writeCheckpoints()
	}
	return p, err
}

// openPartition is OpenPartition; clamped reports a high watermark moved
// below its checkpoint.
func (s *Store) openPartition(topic string, id int, cfg TopicConfig) (p *Partition, clamped bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, fmt.Errorf("log: open partition %s-%d: %w", topic, id, ErrClosed)
	}
	tp := TopicPartition{Topic: topic, Partition: id}
	if p, ok := s.parts[tp]; ok {
		return p, false, nil
	}
	st, ok := s.saved[tp]
	if !ok {
		st = partitionState{recoveryPoint: -1, startOffset: -1, highWatermark: -1}
	}
	p = s.newPartition(topic, id, cfg)
	if err := p.load(s.clean, st); err != nil {
		return nil, false, err
	}
	s.parts[tp] = p
	delete(s.saved, tp)
	delete(s.unrecovered, tp)
	return p, !p.hwFollowsEnd && st.highWatermark > p.HighWatermark(), nil
}

// Partition returns an open partition.
func (s *Store) Partition(topic string, id int) (*Partition, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.parts[TopicPartition{Topic: topic, Partition: id}]
	return p, ok
}

// Partitions returns the open partitions, sorted by topic and id.
func (s *Store) Partitions() []*Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ps := make([]*Partition, 0, len(s.parts))
	for _, p := range s.parts {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *Partition) int {
		return tp.Compare(TopicPartition{Topic: a.topic, Partition: a.id}, TopicPartition{Topic: b.topic, Partition: b.id})
	})
	return ps
}

// PartitionDirs returns the partitions that have a directory in the data
// dir, open or not, sorted: what an owner compares with what it knows to
// find leftovers.
func (s *Store) PartitionDirs() ([]TopicPartition, error) {
	names, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("log: read data dir: %w", err)
	}
	return s.partitionDirsIn(names), nil
}

// partitionDirsIn returns the partitions whose directory is among names,
// entries of the data dir, sorted.
func (s *Store) partitionDirsIn(names []string) []TopicPartition {
	var out []TopicPartition
	for _, name := range names {
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		id, err := strconv.Atoi(name[i+1:])
		topic := name[:i]
		if err != nil || id < 0 || ValidTopicName(topic) != nil || name != topic+"-"+strconv.Itoa(id) {
			continue
		}
		if fi, err := s.fs.Stat(filepath.Join(s.dir, name)); err != nil || !fi.IsDir() {
			continue
		}
		out = append(out, TopicPartition{Topic: topic, Partition: id})
	}
	slices.SortFunc(out, tp.Compare)
	return out
}

// RemovePartition closes a partition (appends and reads in flight end with
// ErrClosed) and deletes its directory, whether it was open or only on
// disk. The directory is first renamed aside (asideName, and the data dir
// fsynced), so a crash in the middle of the removal never leaves a partial
// partition: the next OpenStore finishes it. A partition neither open nor
// on disk is ErrUnknownPartition.
func (s *Store) RemovePartition(topic string, id int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	aside, err := s.moveAside(topic, id)
	if err != nil || aside == "" {
		return err
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("log: remove partition %s-%d: %w", topic, id, err)
	}
	return s.removeAside(aside)
}

// moveAside closes partition id of topic if it is open and renames its
// directory to a new aside name, which it returns ("" if the partition was
// open but had no directory). The caller makes the rename durable
// (SyncDir) and then removes the aside (removeAside); a crash in between
// leaves it for the next open. Holds s.mu.
func (s *Store) moveAside(topic string, id int) (string, error) {
	if err := ValidTopicName(topic); err != nil {
		return "", err
	}
	if s.closed {
		return "", fmt.Errorf("log: remove partition %s-%d: %w", topic, id, ErrClosed)
	}
	tp := TopicPartition{Topic: topic, Partition: id}
	dir := s.partitionDir(topic, id)
	p, open := s.parts[tp]
	if open {
		delete(s.parts, tp)
		p.close()
		if s.cfg.Notify != nil {
			s.cfg.Notify(p) // parked fetches re-read and find it gone
		}
	}
	delete(s.saved, tp)
	if _, err := s.fs.Stat(dir); isNotExist(err) {
		if open {
			return "", nil
		}
		return "", fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, id)
	}
	aside := filepath.Join(s.dir, asideName(topic, id, rand.Uint64()))
	if err := s.fs.RemoveAll(aside); err != nil { // a tag drawn twice
		return "", fmt.Errorf("log: remove partition %s-%d: %w", topic, id, err)
	}
	if err := s.fs.Rename(dir, aside); err != nil {
		return "", fmt.Errorf("log: remove partition %s-%d: %w", topic, id, err)
	}
	delete(s.unrecovered, tp) // the next open finishes the removal
	return aside, nil
}

// moveAsideAll moves the directories of parts aside (moveAside) and makes
// the renames durable with one fsync of the data dir. It goes on past a
// partition it cannot move; the first error is returned with the asides
// of the others, which are durable only if it is nil.
func (s *Store) moveAsideAll(parts []*Partition) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var asides []string
	var first error
	for _, p := range parts {
		aside, err := s.moveAside(p.topic, p.id)
		if err != nil && first == nil {
			first = err
		}
		if aside != "" {
			asides = append(asides, aside)
		}
	}
	if len(asides) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil && first == nil {
			first = fmt.Errorf("log: remove partitions: sync dir %s: %w", s.dir, err)
		}
	}
	return asides, first
}

// removeAside deletes a directory moveAside renamed, once the rename is
// durable. Files it cannot delete stay for the next open (a warning);
// only a failed fsync of the data dir is an error.
func (s *Store) removeAside(aside string) error {
	if err := s.fs.RemoveAll(aside); err != nil {
		s.logger.Warn("remove partition: files left behind (removed at next open)", "dir", aside, "err", err)
		return nil
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("log: remove partition directory %s: %w", filepath.Base(aside), err)
	}
	return nil
}

// leaveUnopened takes a partition directory its owner leaves behind, never
// to open it, out of those a clean shutdown waits to see recovered.
func (s *Store) leaveUnopened(tp TopicPartition) {
	s.mu.Lock()
	delete(s.unrecovered, tp)
	s.mu.Unlock()
}

// hasAside reports whether open found an aside of partition id of topic:
// a removal of it that a crash interrupted.
func (s *Store) hasAside(topic string, id int) bool {
	for _, name := range s.asides {
		if isAsideOf(name, topic, id) {
			return true
		}
	}
	return false
}

// finishRemovals deletes the asides open found: removals a crash
// interrupted. One it cannot delete stays where it is, out of the way of
// every partition, with a warning: the data dir opens all the same.
func (s *Store) finishRemovals() error {
	removed := false
	for _, name := range s.asides {
		if err := s.fs.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			s.logger.Warn("could not finish removing a partition directory; leaving it", "dir", name, "err", err)
			continue
		}
		removed = true
	}
	s.asides = nil
	if removed {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("log: sync dir %s: %w", s.dir, err)
		}
	}
	return nil
}

// Close stops the background loop, flushes and closes every partition,
// writes the checkpoints and, if everything was flushed and every
// partition directory recovered, the clean-shutdown marker; and releases
// the data dir.
func (s *Store) Close() error { return s.close(true) }

// Discard closes the store of a data dir that is about to be thrown away
// (a test fixture's private in-memory FS): as Close, it stops the
// background loop and flushes and closes every partition, but it writes
// neither the checkpoints nor the clean-shutdown marker, which only a later
// open would read. Should the dir be opened again all the same, that open
// recovers every partition, as after a crash once everything was flushed.
func (s *Store) Discard() error { return s.shutdown(false, false) }

// close is Close; without markClean it never writes the clean-shutdown
// marker (an owner whose open failed half-way).
func (s *Store) close(markClean bool) error { return s.shutdown(markClean, true) }

// shutdown is Close, Discard and close: checkpoints says whether the
// checkpoints are written, markClean whether the marker may be.
func (s *Store) shutdown(markClean, checkpoints bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stopLoop()

	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, p := range s.Partitions() {
		keep(p.close())
	}
	if checkpoints {
		keep(s.writeCheckpoints())
	}
	s.mu.RLock()
	recovered := len(s.unrecovered) == 0
	s.mu.RUnlock()
	if !recovered {
		s.logger.Info("partitions left unrecovered: the next open recovers them", "dir", s.dir)
	}
	if first == nil && markClean && recovered {
		// Only a fully flushed store is clean.
		f, err := s.fs.Create(filepath.Join(s.dir, cleanShutdown))
		if err == nil {
			keep(f.Sync())
			keep(f.Close())
			keep(s.fs.SyncDir(s.dir))
		} else {
			keep(err)
		}
	}
	keep(s.lock.Close())
	return first
}

// writeCheckpoints writes the recovery points, log start offsets and high
// watermarks of the open partitions, and what the checkpoints read at open
// said about the partitions not open.
func (s *Store) writeCheckpoints() error {
	rps := map[TopicPartition]int64{}
	starts := map[TopicPartition]int64{}
	hws := map[TopicPartition]int64{}
	s.mu.RLock()
	for tp, st := range s.saved {
		if st.recoveryPoint >= 0 {
			rps[tp] = st.recoveryPoint
		}
		if st.startOffset >= 0 {
			starts[tp] = st.startOffset
		}
		if st.highWatermark >= 0 {
			hws[tp] = st.highWatermark
		}
	}
	for tp, p := range s.parts {
		rps[tp] = p.checkpointRecoveryPoint()
		starts[tp] = p.StartOffset()
		hws[tp] = p.HighWatermark()
	}
	s.mu.RUnlock()
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	if s.ckpts == nil {
		s.ckpts = map[string]string{}
	}
	// Each changed file is written to a temp file, fsynced and renamed over
	// the old one; one directory fsync then makes the renames durable. A
	// crash before it leaves each file old or new, never torn: every mix is
	// a state the files have been in or a safe one (a recovery point, start
	// offset or high watermark from the previous write is lower, and open
	// clamps each to the log it finds).
	var renamed []string
	var first error
	for _, c := range []struct {
		name    string
		offsets map[TopicPartition]int64
	}{{recoveryPointFile, rps}, {logStartFile, starts}, {highWatermarkFile, hws}} {
		data := formatCheckpoint(c.offsets)
		if s.ckpts[c.name] == string(data) {
			continue // unchanged since this store last wrote it
		}
		if err := vfs.ReplaceFile(s.fs, filepath.Join(s.dir, c.name), data); err != nil {
			first = fmt.Errorf("log: write checkpoint %s: %w", c.name, err)
			break
		}
		renamed = append(renamed, c.name)
		s.ckpts[c.name] = string(data)
	}
	if len(renamed) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil {
			for _, name := range renamed {
				delete(s.ckpts, name) // not known to be durable: written again next time
			}
			if first == nil {
				first = fmt.Errorf("log: write checkpoints: sync dir %s: %w", s.dir, err)
			}
		}
	}
	return first
}

// WriteCheckpoints writes the checkpoint files now (they are also written
// every CheckpointInterval, after retention, after a truncation that moved
// a high watermark back, and on Close).
func (s *Store) WriteCheckpoints() error { return s.writeCheckpoints() }

func (s *Store) wakeLoop() {
	s.startLoop()
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}
