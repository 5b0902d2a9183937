package log

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

func TestCreatePartitionsPersists(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		ctx := context.Background()
		b := openT(t, fs, dir)
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2, SegmentBytes: 4096})
		require.NoError(t, err)
		_, err = b.Partition("t", 0)
		require.NoError(t, err)
		for _, n := range []int{0, 1, 2} {
			require.ErrorIs(t, b.CreatePartitions(ctx, "t", n), ErrInvalidPartitions, "count %d", n)
		}
		require.ErrorIs(t, b.CreatePartitions(ctx, "nope", 3), ErrUnknownTopic)
		require.ErrorIs(t, b.CreatePartitions(ctx, "bad/name", 3), ErrInvalidTopic)
		require.ErrorIs(t, b.CreatePartitions(ctx, OffsetsTopic, 3), ErrInvalidTopic)
		n, err := b.Partitions(context.Background(), "t")
		require.NoError(t, err)
		require.Equal(t, 2, n, "a refused call changes nothing")

		require.NoError(t, b.CreatePartitions(ctx, "t", 4))
		n, err = b.Partitions(context.Background(), "t")
		require.NoError(t, err)
		require.Equal(t, 4, n)
		cfg, err := b.TopicConfig("t")
		require.NoError(t, err)
		require.Equal(t, 4, cfg.Partitions)
		p3, err := b.Partition("t", 3)
		require.NoError(t, err)
		require.EqualValues(t, 4096, p3.config().SegmentBytes, "new partitions have the topic's config")
		_, err = p3.Append(rec(1))
		require.NoError(t, err)
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		n, err = b.Partitions(context.Background(), "t")
		require.NoError(t, err)
		require.Equal(t, 4, n, "the new count survives a restart")
		p3, err = b.Partition("t", 3)
		require.NoError(t, err)
		recs, err := p3.Read(0, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, rec(1).Value, recs[0].Value)
	})
}

func TestAlterTopicConfigLiveAndPersisted(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2, SegmentBytes: 4096})
		require.NoError(t, err)
		o, err := b.TopicOverrides("t")
		require.NoError(t, err)
		require.Equal(t, TopicConfig{SegmentBytes: 4096}, o, "what CreateTopic was given is set on the topic")

		// Refused: nothing changes.
		for _, bad := range []TopicConfig{{Partitions: 3}, {ReplicationFactor: 2}, {SegmentBytes: -1}, {MinCleanableDirtyRatio: 2}} {
			require.ErrorIs(t, b.AlterTopicConfig("t", bad), ErrInvalidConfig, "%+v", bad)
			require.ErrorIs(t, b.ValidateTopicConfig("t", bad), ErrInvalidConfig, "%+v", bad)
		}
		require.ErrorIs(t, b.AlterTopicConfig("nope", TopicConfig{}), ErrUnknownTopic)
		require.ErrorIs(t, b.AlterTopicConfig(OffsetsTopic, TopicConfig{}), ErrInvalidTopic)
		require.NoError(t, b.ValidateTopicConfig("t", TopicConfig{MaxMessageBytes: 100}))
		cfg, err := b.TopicConfig("t")
		require.NoError(t, err)
		require.Equal(t, TopicConfig{Partitions: 2, SegmentBytes: 4096}.WithDefaults(), cfg)

		p, err := b.Partition("t", 1)
		require.NoError(t, err)
		big := Record{Value: make([]byte, 300)}
		_, err = p.Append(big)
		require.NoError(t, err)

		want := TopicConfig{MaxMessageBytes: 200, RetentionTime: -1, Cleanup: CleanupCompactDelete}
		require.NoError(t, b.AlterTopicConfig("t", want))
		cfg, err = b.TopicConfig("t")
		require.NoError(t, err)
		require.Equal(t, TopicConfig{Partitions: 2, MaxMessageBytes: 200, RetentionTime: -1, Cleanup: CleanupCompactDelete}.WithDefaults(), cfg,
			"the overrides replace the old ones: segment.bytes is the default again")
		// Live: the partition the caller already holds takes the new limit.
		_, err = p.Append(big)
		require.ErrorIs(t, err, ErrRecordTooLarge)
		require.Equal(t, CleanupCompactDelete, p.config().Cleanup)
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		o, err = b.TopicOverrides("t")
		require.NoError(t, err)
		require.Equal(t, want, o, "the overrides survive a restart")
		cfg2, err := b.TopicConfig("t")
		require.NoError(t, err)
		require.Equal(t, cfg, cfg2)
		p, err = b.Partition("t", 0)
		require.NoError(t, err)
		_, err = p.Append(big)
		require.ErrorIs(t, err, ErrRecordTooLarge)
	})
}

// TestTopicsJSONWithoutOverrides: a topics.json from before overrides were
// kept has its non-default configs taken as set on the topic, so that an
// alteration keeps them.
func TestTopicsJSONWithoutOverrides(t *testing.T) {
	fs := vfs.NewMem()
	b := openT(t, fs, "/d")
	_, err := b.CreateTopic("t", TopicConfig{SegmentBytes: 4096, RetentionTime: -1})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	// Rewrite it as an older broker did: no "overrides" member.
	cfg := TopicConfig{SegmentBytes: 4096, RetentionTime: -1}.WithDefaults()
	old := topicsMeta{Version: topicsVersion, Topics: map[string]TopicConfig{"t": cfg}}
	data, err := json.Marshal(old)
	require.NoError(t, err)
	require.NotContains(t, string(data), "overrides")
	require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Join("/d", topicsFile), data))

	b = openT(t, fs, "/d")
	defer b.Close()
	o, err := b.TopicOverrides("t")
	require.NoError(t, err)
	require.Equal(t, TopicConfig{SegmentBytes: 4096, RetentionTime: -1}, o)
	require.NoError(t, b.AlterTopicConfig("t", TopicConfig{SegmentBytes: 4096, RetentionTime: -1, MaxMessageBytes: 5000}))
	got, err := b.TopicConfig("t")
	require.NoError(t, err)
	require.EqualValues(t, 4096, got.SegmentBytes)
	require.Equal(t, time.Duration(-1), got.RetentionTime)
	require.Equal(t, 5000, got.MaxMessageBytes)
}

func TestCreateTopicReplicationFactor(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	_, err := b.CreateTopic("t", TopicConfig{ReplicationFactor: 3})
	require.ErrorIs(t, err, ErrInvalidReplicationFactor)
	require.ErrorIs(t, err, ErrInvalidConfig, "still an invalid config, as before")
}

func TestBrokerEndOffsetForEpoch(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	appendN(t, p, 2, 2) // 0..3 in epoch 0
	require.NoError(t, p.SetLeaderEpoch(3))
	appendN(t, p, 1, 2) // 4..5 in epoch 3
	for _, c := range []struct {
		ask, epoch int32
		end        int64
	}{{0, 0, 4}, {1, 0, 4}, {3, 3, 6}, {4, UndefinedEpoch, UndefinedEpochOffset}} {
		e, end, err := b.EndOffsetForEpoch(TopicPartition{Topic: "t"}, c.ask)
		require.NoError(t, err)
		require.Equal(t, c.epoch, e, "epoch %d", c.ask)
		require.Equal(t, c.end, end, "epoch %d", c.ask)
	}
	_, _, err := b.EndOffsetForEpoch(TopicPartition{Topic: "t", Partition: 1}, 0)
	require.ErrorIs(t, err, ErrUnknownPartition)
}

func TestCommitMetadataSurvivesRestart(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		tp0, tp1 := TopicPartition{Topic: "t"}, TopicPartition{Topic: "t", Partition: 1}
		ctx := context.Background()
		require.NoError(t, b.GroupCoordinator().CommitWithMetadata(ctx, "g", "", -1, map[TopicPartition]group.CommittedOffset{
			tp0: {Offset: 10, LeaderEpoch: 0, Metadata: "m0"},
			tp1: {Offset: 20, LeaderEpoch: -1},
		}))
		require.NoError(t, b.CommitOffsets(ctx, "plain", "", -1, map[TopicPartition]int64{tp0: 3}))
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		require.Equal(t, map[TopicPartition]group.CommittedOffset{
			tp0: {Offset: 10, LeaderEpoch: 0, Metadata: "m0"},
			tp1: {Offset: 20, LeaderEpoch: -1},
		}, b.GroupCoordinator().CommittedWithMetadata("g", nil))
		got, err := b.FetchOffsets(ctx, "plain", []TopicPartition{tp0})
		require.NoError(t, err)
		require.Equal(t, map[TopicPartition]int64{tp0: 3}, got)
	})
}

// TestAlterTopicConfigAppliesLive: segment.bytes and retention.bytes take
// effect on the partitions at once; a min.insync.replicas above the
// replication factor is refused and changes nothing.
func TestAlterTopicConfigAppliesLive(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	appendN(t, p, 10, 3)
	require.Equal(t, 1, p.Segments(), "1 GiB segments: one")

	require.ErrorIs(t, b.AlterTopicConfig("t", TopicConfig{SegmentBytes: 512, MinInSyncReplicas: 2}), ErrInvalidConfig)
	require.NoError(t, b.AlterTopicConfig("t", TopicConfig{SegmentBytes: 512, RetentionBytes: 2048}))
	appendN(t, p, 30, 3)
	require.Greater(t, p.Segments(), 4, "the new segment size rolls")
	before := p.Segments()
	b.enforceRetention(time.Now())
	require.Less(t, p.Segments(), before, "the new retention deletes")
	require.Positive(t, p.StartOffset())

	raw := func() []byte {
		var bd batch.Builder
		bd.Reset(time.Now().UnixMilli())
		bd.Append(time.Now().UnixMilli(), nil, []byte("v"), nil)
		return bd.Bytes()
	}
	_, err := b.ProduceBatch(context.Background(), TopicPartition{Topic: "t"}, raw(), AcksAll)
	require.NoError(t, err, "min.insync.replicas still 1")
}

// TestAlterTopicConfigDuringAppends alters a topic's configuration while
// appends, reads and retention run on its partition (for the race
// detector), and every append sees one configuration or the other whole.
func TestAlterTopicConfigDuringAppends(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{SegmentBytes: 4096})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	run(func() error {
		_, err := p.Append(Record{Value: make([]byte, 100)})
		return err
	})
	run(func() error {
		_, err := p.Read(p.StartOffset(), 1<<16)
		if errors.Is(err, ErrOffsetOutOfRange) {
			return nil // retention moved the start under us
		}
		return err
	})
	run(func() error {
		b.enforceRetention(time.Now())
		return nil
	})
	// At least 200 alters, and until the appender has been through several
	// segments: on a busy machine the alters alone can be done before the
	// other goroutines first run.
	for i := 0; i < 200 || p.EndOffset() < 200; i++ {
		cfg := TopicConfig{SegmentBytes: 4096, RetentionBytes: 16384}
		if i%2 == 1 {
			cfg = TopicConfig{SegmentBytes: 2048, Compression: TopicCompressionSnappy}
		}
		require.NoError(t, b.AlterTopicConfig("t", cfg))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, p.EndOffset())
}
