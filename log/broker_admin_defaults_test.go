package log

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestTopicDefaults: dynamic broker defaults apply at once to every topic
// that does not set the config, the node's over the cluster's over
// Config.DefaultTopic, to topics created later too, and survive a reopen;
// invalid ones change nothing.
func TestTopicDefaults(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		open := func() *Broker {
			b, err := Open(dir, Config{FS: fs, DefaultTopic: TopicConfig{SegmentBytes: 1 << 20}})
			require.NoError(t, err)
			return b
		}
		b := open()
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		_, err = b.CreateTopic("o", TopicConfig{Partitions: 1, RetentionTime: time.Minute})
		require.NoError(t, err)
		cfgOf := func(b *Broker, name string) TopicConfig {
			cfg, err := b.TopicConfig(name)
			require.NoError(t, err)
			return cfg
		}
		partCfg := func(b *Broker, name string, i int) TopicConfig {
			p, err := b.Partition(name, i)
			require.NoError(t, err)
			return *p.config()
		}
		require.Equal(t, int64(1<<20), cfgOf(b, "t").SegmentBytes)

		require.NoError(t, b.AlterTopicDefaults(ClusterDefaults, TopicConfig{RetentionTime: time.Hour, SegmentBytes: 2 << 20}))
		require.Equal(t, time.Hour, cfgOf(b, "t").RetentionTime)
		require.Equal(t, int64(2<<20), cfgOf(b, "t").SegmentBytes, "over Config.DefaultTopic")
		require.Equal(t, time.Hour, partCfg(b, "t", 1).RetentionTime, "applied to the partitions at once")
		require.Equal(t, time.Minute, cfgOf(b, "o").RetentionTime, "a topic's own config wins")
		require.NoError(t, b.AlterTopicDefaults(NodeDefaults, TopicConfig{RetentionTime: 2 * time.Hour}))
		require.Equal(t, 2*time.Hour, cfgOf(b, "t").RetentionTime, "the node's over the cluster's")
		_, err = b.CreateTopic("later", TopicConfig{Partitions: 1})
		require.NoError(t, err)
		require.Equal(t, 2*time.Hour, cfgOf(b, "later").RetentionTime)
		// AlterTopicConfig of a topic keeps the dynamic defaults under it.
		require.NoError(t, b.AlterTopicConfig("o", TopicConfig{}))
		require.Equal(t, 2*time.Hour, cfgOf(b, "o").RetentionTime)

		// Invalid: nothing changes.
		require.ErrorIs(t, b.AlterTopicDefaults(ClusterDefaults, TopicConfig{SegmentBytes: 1}), ErrInvalidConfig)
		require.ErrorIs(t, b.ValidateTopicDefaults(ClusterDefaults, TopicConfig{Partitions: 3}), ErrInvalidConfig)
		require.ErrorIs(t, b.AlterTopicDefaults(DefaultsScope(9), TopicConfig{}), ErrInvalidConfig)
		require.NoError(t, b.ValidateTopicDefaults(ClusterDefaults, TopicConfig{RetentionTime: 3 * time.Hour}))
		require.Equal(t, TopicConfig{RetentionTime: time.Hour, SegmentBytes: 2 << 20}, b.TopicDefaults(ClusterDefaults))
		require.Equal(t, 2*time.Hour, cfgOf(b, "t").RetentionTime)
		require.NoError(t, b.Close())

		b = open()
		require.Equal(t, TopicConfig{RetentionTime: 2 * time.Hour}, b.TopicDefaults(NodeDefaults))
		require.Equal(t, 2*time.Hour, cfgOf(b, "t").RetentionTime)
		require.Equal(t, int64(2<<20), partCfg(b, "t", 0).SegmentBytes)
		// Replaced whole: the node's set emptied, the cluster's show.
		require.NoError(t, b.AlterTopicDefaults(NodeDefaults, TopicConfig{}))
		require.Equal(t, time.Hour, cfgOf(b, "t").RetentionTime)
		require.NoError(t, b.Close())

		// A crash after broker-configs.json was written and before
		// topics.json: the next Open applies the defaults to every topic.
		require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Join(dir, brokerDefaultsFile), []byte(`{"cluster":{"RetentionTime":60000000000}}`)))
		b = open()
		require.Equal(t, time.Minute, cfgOf(b, "t").RetentionTime)
		require.Equal(t, time.Minute, partCfg(b, "t", 1).RetentionTime)
		require.Equal(t, int64(1<<20), cfgOf(b, "t").SegmentBytes, "the static default again")
		require.NoError(t, b.Close())
	})
}
