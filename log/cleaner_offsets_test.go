package log

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestOffsetsTopicStaysSmall: __consumer_offsets is compacted, so after
// many commits it holds about one record per (group, partition), and a
// reopen replays that few and finds every group's last commit.
func TestOffsetsTopicStaysSmall(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	cfg := Config{FS: fs, RetentionCheckInterval: time.Hour, OffsetsSegmentBytes: 4096}
	b, err := Open("/d", cfg)
	require.NoError(t, err)
	const parts, groups, commits = 4, 3, 300
	_, err = b.CreateTopic("t", TopicConfig{Partitions: parts})
	require.NoError(t, err)
	want := map[string]map[TopicPartition]int64{}
	members := map[string]group.JoinResponse{}
	for _, g := range []string{"a", "b", "c"}[:groups] {
		resp, err := b.JoinGroup(ctx, group.JoinRequest{Group: g, Topics: []string{"t"}})
		require.NoError(t, err)
		members[g] = resp
		want[g] = map[TopicPartition]int64{}
	}
	for i := range commits {
		for g, resp := range members {
			offs := map[TopicPartition]int64{}
			for p := range parts {
				tp := TopicPartition{Topic: "t", Partition: p}
				offs[tp] = int64(i*10 + p)
				want[g][tp] = offs[tp]
			}
			require.NoError(t, b.CommitOffsets(ctx, g, resp.MemberID, resp.Generation, offs))
		}
	}
	op, err := b.Partition(OffsetsTopic, 0)
	require.NoError(t, err)
	before := op.Size()
	passes, err := b.cleaner.run(time.Now())
	require.NoError(t, err)
	require.Positive(t, passes)
	segs := *op.segs.Load()
	active := segs[len(segs)-1]
	recs := scan(t, op)
	var inActive int
	for _, r := range recs {
		if r.Offset >= active.BaseOffset() {
			inActive++
		}
	}
	t.Logf("%d commits of %d partitions by %d groups: %d bytes before cleaning, %d after; %d records (%d in the active segment)",
		commits, parts, groups, before, op.Size(), len(recs), inActive)
	// One key per (group, partition) commit and one per group's metadata.
	require.LessOrEqual(t, len(recs)-inActive, groups*parts+groups, "the cleaned part holds one record per key")
	require.Less(t, op.Size(), before/10)
	require.NoError(t, b.Close())

	b, err = Open("/d", cfg)
	require.NoError(t, err)
	defer b.Close()
	for g, offs := range want {
		var tps []TopicPartition
		for tp := range offs {
			tps = append(tps, tp)
		}
		got, err := b.FetchOffsets(ctx, g, tps)
		require.NoError(t, err)
		require.Equal(t, offs, got, "group %s after the reopen", g)
	}
}
