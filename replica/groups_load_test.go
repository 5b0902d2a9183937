package replica

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// loadOffsets replays a partition of __consumer_offsets: the last commit
// of each (group, partition) wins, a tombstone deletes it, records of other
// kinds are skipped; a cancelled load stops.
func TestLoadOffsets(t *testing.T) {
	st, err := log.OpenStore(t.TempDir(), log.StoreConfig{})
	require.NoError(t, err)
	defer st.Close()
	p, err := st.CreatePartition(log.OffsetsTopic, 0, log.TopicConfig{})
	require.NoError(t, err)
	now := time.Now()
	a0, a1 := log.TopicPartition{Topic: "a", Partition: 0}, log.TopicPartition{Topic: "a", Partition: 1}
	type rec struct {
		group string
		tp    log.TopicPartition
		off   int64 // -1: a tombstone
	}
	appendBatch := func(rs ...rec) {
		var bd batch.Builder
		bd.Reset(now.UnixMilli())
		for _, r := range rs {
			k, v := group.EncodeOffsetRecord(r.group, r.tp, max(r.off, 0), now)
			if r.off < 0 {
				v = nil
			}
			bd.Append(now.UnixMilli(), k, v, nil)
		}
		_, _, err := p.AppendBatch(bd.Bytes())
		require.NoError(t, err)
	}
	appendBatch(rec{"g", a0, 5}, rec{"g", a1, 7}, rec{"h", a0, 1})
	appendBatch(rec{"g", a0, 9})  // a later commit wins
	appendBatch(rec{"h", a0, -1}) // deleted
	// Group metadata records (key version 2): the last of each group is
	// kept (group.New decodes it), a tombstone deletes it.
	appendMeta := func(g string, v []byte) {
		var bd batch.Builder
		bd.Reset(now.UnixMilli())
		bd.Append(now.UnixMilli(), group.EncodeGroupMetadataKey(g), v, nil)
		_, _, err := p.AppendBatch(bd.Bytes())
		require.NoError(t, err)
	}
	appendMeta("g", []byte{0, 3})
	appendMeta("h", []byte{0, 3, 1})
	appendMeta("g", []byte{0, 3, 2})
	appendMeta("h", nil)
	appendBatch(rec{"k", a1, 2})

	got, groups, err := loadOffsets(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{"g": {0, 3, 2}}, groups)
	require.Equal(t, map[string]map[log.TopicPartition]int64{
		"g": {a0: 9, a1: 7},
		"h": {},
		"k": {a1: 2},
	}, got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = loadOffsets(ctx, p)
	require.ErrorIs(t, err, context.Canceled)
}
