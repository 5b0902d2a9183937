package log

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// withMinInSync gives the partitions of topic a min.insync.replicas of n,
// as a topics.json written before Validate refused one above the
// replication factor would: the only way left to reach
// ErrNotEnoughReplicas on a standalone broker.
func withMinInSync(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	top, err := b.Topic(topic)
	require.NoError(t, err)
	for i := range top.Partitions() {
		p, _ := top.Partition(i)
		p.editConfig(func(c *TopicConfig) { c.MinInSyncReplicas = n })
	}
}

// invalidTopicConfigs are configurations Kafka refuses (its LogConfig's
// bounds) or that cannot work, each with the name of what is wrong.
var invalidTopicConfigs = []struct {
	name string
	cfg  TopicConfig
}{
	{"segment.bytes 1 (issue 25: 6,000 one-record segments)", TopicConfig{SegmentBytes: 1}},
	{"segment.bytes 13", TopicConfig{SegmentBytes: 13}},
	{"segment.bytes negative", TopicConfig{SegmentBytes: -1}},
	{"segment.bytes past what an index addresses", TopicConfig{SegmentBytes: math.MaxUint32 + 1}},
	{"segment.ms below 1 ms", TopicConfig{SegmentTime: time.Microsecond}},
	{"segment.ms negative", TopicConfig{SegmentTime: -time.Millisecond}},
	{"segment.index.bytes 23", TopicConfig{MaxIndexBytes: 23}},
	{"segment.index.bytes negative", TopicConfig{MaxIndexBytes: -1}},
	{"segment.index.bytes past an int", TopicConfig{MaxIndexBytes: math.MaxInt32 + 1}},
	{"index.interval.bytes negative", TopicConfig{IndexIntervalBytes: -1}},
	{"index.interval.bytes past an int", TopicConfig{IndexIntervalBytes: math.MaxInt32 + 1}},
	{"retention.bytes negative", TopicConfig{RetentionBytes: -5}},
	{"max.message.bytes negative", TopicConfig{MaxMessageBytes: -1}},
	{"max.message.bytes past an int", TopicConfig{MaxMessageBytes: math.MaxInt32 + 1}},
	{"min.insync.replicas negative", TopicConfig{MinInSyncReplicas: -1}},
	{"min.insync.replicas above the replication factor", TopicConfig{MinInSyncReplicas: 2}},
	{"min.insync.replicas 3 of 2", TopicConfig{ReplicationFactor: 2, MinInSyncReplicas: 3}},
	{"min.cleanable.dirty.ratio above 1", TopicConfig{MinCleanableDirtyRatio: 1.5}},
	{"min.cleanable.dirty.ratio negative", TopicConfig{MinCleanableDirtyRatio: -0.1}},
	{"min.cleanable.dirty.ratio NaN", TopicConfig{MinCleanableDirtyRatio: math.NaN()}},
	{"delete.retention.ms negative", TopicConfig{DeleteRetention: -time.Millisecond}},
	{"flush.messages negative", TopicConfig{FlushMessages: -1}},
	{"flush.ms negative", TopicConfig{FlushInterval: -time.Millisecond}},
	{"min.compaction.lag.ms negative", TopicConfig{MinCompactionLag: -time.Millisecond}},
	{"max.compaction.lag.ms negative", TopicConfig{MaxCompactionLag: -time.Millisecond}},
	{"max.compaction.lag.ms below min", TopicConfig{MinCompactionLag: time.Hour, MaxCompactionLag: time.Minute}},
	{"cleanup policy unknown", TopicConfig{Cleanup: 7}},
	{"compression unknown", TopicConfig{Compression: 9}},
	{"partitions negative", TopicConfig{Partitions: -1}},
}

// TestTopicConfigValidate: Kafka's bounds, at Validate, CreateTopic,
// AlterTopicConfig (and its validate-only twin) and Open's DefaultTopic:
// each invalid config is ErrInvalidConfig with the reason and changes
// nothing; the bounds themselves are valid.
func TestTopicConfigValidate(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	_, err := b.CreateTopic("t", TopicConfig{})
	require.NoError(t, err)
	before := b.topics["t"]
	for _, tc := range invalidTopicConfigs {
		err := tc.cfg.WithDefaults().Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, tc.name)
		require.Greater(t, len(err.Error()), len(ErrInvalidConfig.Error())+2, "%s: a reason", tc.name)

		_, err = b.CreateTopic("new", tc.cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, tc.name)
		require.NotContains(t, b.Topics(), "new", tc.name)
		require.Empty(t, dataDirEntriesOf(t, b, "new"), tc.name)

		o := tc.cfg
		o.Partitions, o.ReplicationFactor = 0, 0
		if o == (TopicConfig{}) {
			continue // only a partition count or replication factor: not a topic config
		}
		require.ErrorIs(t, b.ValidateTopicConfig("t", o), ErrInvalidConfig, tc.name)
		require.ErrorIs(t, b.AlterTopicConfig("t", o), ErrInvalidConfig, tc.name)
		require.Same(t, before, b.topics["t"], "%s: nothing changed", tc.name)

		_, err = Open("/other", Config{FS: vfs.NewMem(), DefaultTopic: o})
		require.ErrorIs(t, err, ErrInvalidConfig, "%s as the default", tc.name)
	}

	for _, cfg := range []TopicConfig{
		{SegmentBytes: minSegmentBytes},
		{SegmentBytes: math.MaxUint32},
		{SegmentBytes: 2 << 30}, // bench/zerocopy.go's
		{SegmentTime: time.Millisecond},
		{MaxIndexBytes: minIndexBytes},
		{RetentionTime: -1},
		{RetentionTime: -time.Millisecond},
		{MinCleanableDirtyRatio: 1},
		{DeleteRetention: time.Nanosecond},
		{ReplicationFactor: 3, MinInSyncReplicas: 3},
	} {
		require.NoError(t, cfg.WithDefaults().Validate(), "%+v", cfg)
	}
	_, err = b.CreateTopic("edge", TopicConfig{SegmentBytes: minSegmentBytes})
	require.NoError(t, err)
}

// TestTopicConfigFromBeforeTheBounds: a topic whose topics.json has a
// config Validate now refuses (segment.bytes 1, min.insync.replicas 2 on
// one replica) opens all the same; altering it must make it valid.
func TestTopicConfigFromBeforeTheBounds(t *testing.T) {
	mem := vfs.NewMem()
	b := openT(t, mem, "/d")
	_, err := b.CreateTopic("old", TopicConfig{})
	require.NoError(t, err)
	// topics.json as an older Strata wrote it.
	b.topics["old"].cfg.SegmentBytes, b.topics["old"].cfg.MinInSyncReplicas = 1, 2
	b.topics["old"].overrides = TopicConfig{SegmentBytes: 1, MinInSyncReplicas: 2}
	require.NoError(t, b.writeTopics())
	require.NoError(t, b.Close())

	b = openT(t, mem, "/d")
	defer b.Close()
	top, err := b.Topic("old")
	require.NoError(t, err)
	require.EqualValues(t, 1, top.Config().SegmentBytes)
	require.ErrorIs(t, b.AlterTopicConfig("old", TopicConfig{SegmentBytes: 1}), ErrInvalidConfig)
	require.NoError(t, b.AlterTopicConfig("old", TopicConfig{SegmentBytes: 1 << 20}))
}

// dataDirEntriesOf lists the data dir entries of topic.
func dataDirEntriesOf(t *testing.T, b *Broker, topic string) []string {
	var out []string
	for _, n := range dataDirEntries(t, b.fs, b.dir) {
		if len(n) > len(topic) && n[:len(topic)+1] == topic+"-" {
			out = append(out, n)
		}
	}
	return out
}
