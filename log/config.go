package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/vfs"
)

// Config configures a standalone Broker. The zero value means the defaults.
type Config struct {
	// RetentionCheckInterval is how often retention and the log cleaner
	// runs; 0 → 5 minutes (Kafka's log.retention.check.interval.ms).
	RetentionCheckInterval time.Duration
	// CheckpointInterval is how often the recovery points are written to
	// their checkpoint file; 0 → 60 s (Kafka's
	// log.flush.offset.checkpoint.interval.ms). They are always written on
	// Close.
	CheckpointInterval time.Duration
	// FS is the file system; nil → the operating system's. vfs.NewMem gives
	// a fast in-memory one for tests.
	FS vfs.FS
	// Logger receives the broker's log lines; nil → discard.
	Logger *slog.Logger
	// Clock is the broker's time: segment rolls and retention, flushes and
	// checkpoints, the cleaner, the timing wheel (long polls) and the group
	// coordinator's session timeouts; nil → clock.System(). Tests drive a
	// clocktest.Clock.
	Clock clock.Clock
	// GroupMinSessionTimeout is the shortest session timeout a consumer
	// group member may ask for; 0 → 6 s (Kafka's
	// group.min.session.timeout.ms).
	GroupMinSessionTimeout time.Duration
	// GroupInitialRebalanceDelay holds a new group's first rebalance open
	// that long for more members; 0 → none (Kafka's default is 3 s).
	GroupInitialRebalanceDelay time.Duration
	// DefaultTopic is the configuration whose non-zero fields fill the zero
	// fields of every TopicConfig given to CreateTopic.
	DefaultTopic TopicConfig
	// CleanerBufferBytes bounds the memory of the log cleaner's offset map
	// (key hash → latest offset, 24 bytes an entry); 0 → 128 MiB (Kafka's
	// log.cleaner.dedupe.buffer.size). A pass maps as many keys as fit and
	// the next pass goes on from there.
	CleanerBufferBytes int64
	// OffsetsSegmentBytes is the segment size of OffsetsTopic when it is
	// created. The topic is compacted and only sealed segments are cleaned,
	// so Open replays at most one segment of commits beyond one record per
	// (group, topic, partition). 0 → 8 MiB: smaller than Kafka's
	// offsets.topic.segment.bytes (100 MiB), because an embedded broker
	// replays the topic on every Open.
	OffsetsSegmentBytes int64
	// Metrics, when set, is told of every partition flush and its time,
	// of fetches parking in and leaving the purgatory, and of cleaner
	// passes (see metrics.Hooks); nil → none.
	Metrics metrics.Hooks
	// MaxDecompressedBytes bounds what the records of one compressed batch
	// may decompress to, wherever the broker decompresses (validating and
	// recompressing a produced batch, the cleaner, Partition.Read and
	// Records): decompression stops as soon as it is passed. A produced
	// batch past it gets ErrRecordTooLarge (Kafka's RECORD_TOO_LARGE) and
	// changes nothing; the cleaner marks the partition uncleanable. 0 →
	// 128 MiB (batch.DefaultMaxDecompressed, 128 times the default
	// MaxMessageBytes); at most 1 GiB. A topic whose batches are stored
	// uncompressed (TopicCompressionNone) is also bounded by its
	// MaxMessageBytes.
	MaxDecompressedBytes int
	// TransactionMaxTimeout is Kafka's transaction.max.timeout.ms: the
	// longest transaction timeout a transactional producer may ask for
	// (InitProducerId answers INVALID_TRANSACTION_TIMEOUT past it); 0 →
	// 15 minutes. At most 2147483647 ms.
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is Kafka's transactional.id.expiration.ms:
	// a transactional id with no transaction open that nothing changed for
	// this long is forgotten (its __transaction_state record becomes a
	// tombstone). Checked every hour, or this often if that is less; 0 →
	// 7 days.
	TransactionalIDExpiration time.Duration
	// TransactionAbortTimedOutInterval is Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often the coordinator aborts the transactions past their timeout (a
	// transaction is aborted at the first tick at or after its deadline);
	// 0 → 10 s.
	TransactionAbortTimedOutInterval time.Duration
	// TransactionVersion is the transaction.version (0 to 2) the broker's
	// transaction coordinator uses for the aborts it starts itself (a
	// transaction past its timeout, or fenced by a new producer of its
	// id), as Kafka's coordinator uses the finalized level: 0 → 2, Kafka
	// 4's for a new cluster; negative → 0. A kafka.Server over the broker
	// finalizes its own kafka.Config.TransactionVersion: give both the
	// same (`strata serve --override transaction.version` does).
	TransactionVersion int16
}

func (c Config) withDefaults() Config {
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
	if c.CleanerBufferBytes <= 0 {
		c.CleanerBufferBytes = defaultCleanerBufferBytes
	}
	c.CleanerBufferBytes = max(c.CleanerBufferBytes, minCleanerBufferBytes)
	if c.OffsetsSegmentBytes <= 0 {
		c.OffsetsSegmentBytes = 8 << 20
	}
	return c
}

// CleanupPolicy says what happens to old segments.
type CleanupPolicy int

const (
	// CleanupDelete deletes old segments by RetentionTime and RetentionBytes.
	CleanupDelete CleanupPolicy = iota
	// CleanupCompact keeps the latest record of each key.
	CleanupCompact
	// CleanupCompactDelete does both.
	CleanupCompactDelete
)

func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	}
	return fmt.Sprintf("CleanupPolicy(%d)", int(p))
}

// TopicConfig configures a topic. Zero fields take Kafka's defaults.
type TopicConfig struct {
	Partitions         int           // 0 → 1
	ReplicationFactor  int           // cluster only; 0 → 1
	MinInSyncReplicas  int           // 0 → 1
	SegmentBytes       int64         // 0 → 1 GiB
	SegmentTime        time.Duration // 0 → 7 days
	IndexIntervalBytes int           // 0 → 4096
	MaxIndexBytes      int           // 0 → 10 MiB
	RetentionBytes     int64         // 0 → unlimited
	RetentionTime      time.Duration // 0 → 7 days; negative → forever
	Cleanup            CleanupPolicy // CleanupDelete (zero), CleanupCompact, CleanupCompactDelete
	MaxMessageBytes    int           // 0 → 1 MiB + 12 bytes of log overhead, as Kafka (one batch)
	FlushMessages      int64         // fsync after this many records; 0 → leave to the OS; 1 → every append
	FlushInterval      time.Duration // fsync at least this often; 0 → never by time
	// Compression is the topic's compression.type: TopicCompressionProducer
	// (zero: keep each batch as the producer sent it), TopicCompressionNone,
	// or a codec every batch is recompressed to on append.
	Compression TopicCompression

	// Log compaction (CleanupCompact, CleanupCompactDelete), Kafka's topic
	// configs of the same names.
	DeleteRetention        time.Duration // tombstones kept after the pass that cleaned them; 0 → 1 day
	MinCleanableDirtyRatio float64       // dirty bytes / cleanable bytes that start a pass; 0 → 0.5
	MinCompactionLag       time.Duration // records younger than this are not cleaned; 0 → none
	MaxCompactionLag       time.Duration // a dirty record older than this forces a pass; 0 → unlimited
	// ProducerIDExpiration is Kafka's producer.id.expiration.ms: an
	// idempotent producer silent this long (by its batches' timestamps) is
	// forgotten, and its next batch must start a new epoch at sequence 0.
	// 0 → 24 h (DefaultProducerIDExpiration).
	ProducerIDExpiration time.Duration
}

// Kafka's defaults.
const (
	defaultSegmentBytes       = 1 << 30
	defaultSegmentTime        = 7 * 24 * time.Hour
	defaultIndexIntervalBytes = 4096
	defaultMaxIndexBytes      = 10 << 20
	defaultRetentionTime      = 7 * 24 * time.Hour
	defaultMaxMessageBytes    = 1<<20 + 12
	minIndexBytes             = 24 // room for two time-index entries

	defaultDeleteRetention        = 24 * time.Hour
	defaultMinCleanableDirtyRatio = 0.5
	defaultCleanerBufferBytes     = 128 << 20
	minCleanerBufferBytes         = 1 << 10
)

// merge fills c's zero fields from d.
func (c TopicConfig) merge(d TopicConfig) TopicConfig {
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = d.ReplicationFactor
	}
	if c.MinInSyncReplicas == 0 {
		c.MinInSyncReplicas = d.MinInSyncReplicas
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentTime == 0 {
		c.SegmentTime = d.SegmentTime
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.MaxIndexBytes == 0 {
		c.MaxIndexBytes = d.MaxIndexBytes
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = d.RetentionBytes
	}
	if c.RetentionTime == 0 {
		c.RetentionTime = d.RetentionTime
	}
	if c.Cleanup == 0 {
		c.Cleanup = d.Cleanup
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.FlushMessages == 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.Compression == TopicCompressionProducer {
		c.Compression = d.Compression
	}
	if c.DeleteRetention == 0 {
		c.DeleteRetention = d.DeleteRetention
	}
	if c.MinCleanableDirtyRatio == 0 {
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	if c.MinCompactionLag == 0 {
		c.MinCompactionLag = d.MinCompactionLag
	}
	if c.MaxCompactionLag == 0 {
		c.MaxCompactionLag = d.MaxCompactionLag
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = d.ProducerIDExpiration
	}
	return c
}

// WithDefaults returns c with every zero field set to its default.
func (c TopicConfig) WithDefaults() TopicConfig {
	return c.merge(TopicConfig{
		Partitions:         1,
		ReplicationFactor:  1,
		MinInSyncReplicas:  1,
		SegmentBytes:       defaultSegmentBytes,
		SegmentTime:        defaultSegmentTime,
		IndexIntervalBytes: defaultIndexIntervalBytes,
		MaxIndexBytes:      defaultMaxIndexBytes,
		RetentionTime:      defaultRetentionTime,
		MaxMessageBytes:    defaultMaxMessageBytes,

		DeleteRetention:        defaultDeleteRetention,
		MinCleanableDirtyRatio: defaultMinCleanableDirtyRatio,
		ProducerIDExpiration:   DefaultProducerIDExpiration,
	})
}

// Kafka's bounds on topic configs (its LogConfig) that differ from "not
// negative", in TopicConfig's units.
const (
	// minSegmentBytes is segment.bytes' minimum: LegacyRecord's
	// RECORD_OVERHEAD_V0, Kafka's bound until 4.0 raised it to 1 MiB
	// (Strata keeps 14: small segments serve tests and embedded logs).
	minSegmentBytes = 14
	// maxSegmentBytes is the largest segment an index can address (its
	// positions are 32 bits, unsigned); Kafka's segment.bytes, an INT,
	// stops at 2^31-1, and so does the Kafka protocol's parser.
	maxSegmentBytes = math.MaxUint32
	// maxKafkaInt bounds the configs Kafka types INT (segment.index.bytes,
	// index.interval.bytes, max.message.bytes).
	maxKafkaInt = math.MaxInt32
)

// Validate reports a configuration Kafka refuses, or that cannot work,
// wrapping ErrInvalidConfig with the reason. It expects defaults to be
// applied. The bounds are Kafka's (LogConfig), in TopicConfig's terms
// where a zero field is the default: SegmentBytes from 14 to 2^32-1
// (Kafka's INT stops at 2^31-1; an index here addresses 4 GiB),
// SegmentTime at least 1 ms, MaxIndexBytes at least 24 (Kafka: 4; two
// time-index entries must fit), IndexIntervalBytes, RetentionBytes,
// MaxMessageBytes, FlushMessages, FlushInterval, DeleteRetention and
// MinCompactionLag not negative (Kafka's retention.bytes may be any
// negative: unlimited, 0 here), RetentionTime negative for "forever",
// MinCleanableDirtyRatio in (0, 1], MaxCompactionLag not below
// MinCompactionLag, and MinInSyncReplicas from 1 to ReplicationFactor
// (Kafka accepts more, and then refuses every acks=all produce).
func (c TopicConfig) Validate() error {
	if err := c.usable(); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > maxSegmentBytes:
		return bad("segment.bytes %d outside [%d, %d]", c.SegmentBytes, minSegmentBytes, maxSegmentBytes)
	case c.SegmentTime > 0 && c.SegmentTime < time.Millisecond:
		return bad("segment.ms %v below 1 ms", c.SegmentTime)
	case c.MaxIndexBytes > maxKafkaInt:
		return bad("segment.index.bytes %d above %d", c.MaxIndexBytes, maxKafkaInt)
	case c.IndexIntervalBytes > maxKafkaInt:
		return bad("index.interval.bytes %d above %d", c.IndexIntervalBytes, maxKafkaInt)
	case c.MaxMessageBytes > maxKafkaInt:
		return bad("max.message.bytes %d above %d", c.MaxMessageBytes, maxKafkaInt)
	case c.MinInSyncReplicas > c.ReplicationFactor:
		return bad("min.insync.replicas %d above the replication factor %d: no acks=all produce could succeed", c.MinInSyncReplicas, c.ReplicationFactor)
	}
	return nil
}

// usable reports a configuration the log cannot run with: what a
// partition opened from disk must satisfy (a topic created before Validate
// took Kafka's bounds opens all the same).
func (c TopicConfig) usable() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Partitions < 1:
		return bad("partitions %d < 1", c.Partitions)
	case c.ReplicationFactor < 1:
		return bad("replication factor %d < 1", c.ReplicationFactor)
	case c.MinInSyncReplicas < 1:
		return bad("min.insync.replicas %d < 1", c.MinInSyncReplicas)
	case c.SegmentBytes < 1:
		return bad("segment.bytes %d < 1", c.SegmentBytes)
	case c.SegmentTime < 0:
		return bad("negative segment.ms %v", c.SegmentTime)
	case c.IndexIntervalBytes < 0:
		return bad("negative index.interval.bytes %d", c.IndexIntervalBytes)
	case c.MaxIndexBytes < minIndexBytes:
		return bad("segment.index.bytes %d < %d", c.MaxIndexBytes, minIndexBytes)
	case c.RetentionBytes < 0:
		return bad("negative retention bytes %d (0 means unlimited)", c.RetentionBytes)
	case c.Cleanup < CleanupDelete || c.Cleanup > CleanupCompactDelete:
		return bad("unknown cleanup policy %d", int(c.Cleanup))
	case c.MaxMessageBytes < 1:
		return bad("max.message.bytes %d < 1", c.MaxMessageBytes)
	case c.FlushMessages < 0:
		return bad("negative flush.messages %d", c.FlushMessages)
	case c.FlushInterval < 0:
		return bad("negative flush.ms %v", c.FlushInterval)
	case c.Compression < TopicCompressionProducer || c.Compression > TopicCompressionZstd:
		return bad("unknown compression type %d", int(c.Compression))
	case c.DeleteRetention < 0:
		return bad("negative delete.retention.ms %v", c.DeleteRetention)
	case !(c.MinCleanableDirtyRatio > 0 && c.MinCleanableDirtyRatio <= 1):
		return bad("min.cleanable.dirty.ratio %v outside (0, 1]", c.MinCleanableDirtyRatio)
	case c.MinCompactionLag < 0:
		return bad("negative min.compaction.lag.ms %v", c.MinCompactionLag)
	case c.MaxCompactionLag < 0:
		return bad("negative max.compaction.lag.ms %v (0 means unlimited)", c.MaxCompactionLag)
	case c.MaxCompactionLag > 0 && c.MaxCompactionLag < c.MinCompactionLag:
		return bad("max.compaction.lag.ms %v below min.compaction.lag.ms %v", c.MaxCompactionLag, c.MinCompactionLag)
	case c.ProducerIDExpiration < 0:
		return bad("negative producer id expiration %v", c.ProducerIDExpiration)
	}
	return nil
}

// ValidTopicName reports whether name is a legal topic name: Kafka's rule,
// 1 to 249 characters of [a-zA-Z0-9._-], and neither "." nor "..". Such a
// name can never reach outside the data directory.
func ValidTopicName(name string) error {
	if name == "" || len(name) > 249 {
		return fmt.Errorf("%w: %q must have 1 to 249 characters", ErrInvalidTopic, name)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q; legal characters are [a-zA-Z0-9._-]", ErrInvalidTopic, name, c)
		}
	}
	return nil
}
