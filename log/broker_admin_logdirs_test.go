package log

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

func TestDescribeLogDirs(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		ctx := context.Background()
		b := openT(t, fs, dir)
		_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		p, err := b.Partition("t", 1)
		require.NoError(t, err)
		_, err = p.Append(rec(1), rec(2))
		require.NoError(t, err)

		dirs, err := b.DescribeLogDirs(ctx, nil)
		require.NoError(t, err)
		require.Len(t, dirs, 1)
		abs, _ := filepath.Abs(dir)
		require.Equal(t, abs, dirs[0].Dir)
		require.NoError(t, dirs[0].Err)
		got := map[TopicPartition]int64{}
		for _, lp := range dirs[0].Partitions {
			got[lp.TopicPartition] = lp.Size
			require.Zero(t, lp.OffsetLag)
			require.False(t, lp.IsFuture)
		}
		require.Equal(t, p.Size(), got[TopicPartition{Topic: "t", Partition: 1}])
		require.Positive(t, got[TopicPartition{Topic: "t", Partition: 1}])
		require.Contains(t, got, TopicPartition{Topic: "t", Partition: 0})
		if _, err := b.Partition(OffsetsTopic, 0); err == nil {
			require.Contains(t, got, TopicPartition{Topic: OffsetsTopic, Partition: 0}, "every log, the internal ones too")
		}

		// Asked for some: those it holds, sorted, each once.
		dirs, err = b.DescribeLogDirs(ctx, []TopicPartition{{Topic: "t", Partition: 1}, {Topic: "nope", Partition: 0}, {Topic: "t", Partition: 9}, {Topic: "t", Partition: -1}, {Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}})
		require.NoError(t, err)
		var tps []TopicPartition
		for _, lp := range dirs[0].Partitions {
			tps = append(tps, lp.TopicPartition)
		}
		require.Equal(t, []TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}, tps)
		dirs, err = b.DescribeLogDirs(ctx, []TopicPartition{})
		require.NoError(t, err)
		require.Empty(t, dirs[0].Partitions)

		if fs == vfs.Default {
			require.Positive(t, dirs[0].TotalBytes)
			require.GreaterOrEqual(t, dirs[0].TotalBytes, dirs[0].UsableBytes)
		}
		require.NoError(t, b.Close())
		_, err = b.DescribeLogDirs(ctx, nil)
		require.ErrorIs(t, err, ErrClosed)
	})
}
