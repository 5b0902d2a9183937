package replica_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// log.Admin on a member: AlterTopicConfig through a member that does not
// lead the partition reaches every member's metadata and every replica's
// log — the leader enforces the new max.message.bytes, after a leader
// change and a restart too; invalid changes are refused and change
// nothing. DeleteRecords through a non-leader moves the leader's log start
// and the followers follow.
func TestMemberAlterTopicConfigAndDeleteRecords(t *testing.T) {
	leaktest.Check(t)
	c := startClusterWith(t, 3, "local", nil)
	c.createTopic("cfg", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2, RetentionTime: time.Hour})
	var admin log.Admin = c.any(c.leader("cfg", 0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	o, err := admin.TopicOverrides("cfg")
	require.NoError(t, err)
	require.Equal(t, time.Hour, o.RetentionTime)
	o.MaxMessageBytes = 1024
	require.NoError(t, admin.AlterTopicConfig("cfg", o))
	for _, b := range c.members {
		c.waitImage(b, "the new config", func(*controller.Image) bool {
			cfg, err := b.TopicConfig("cfg")
			return err == nil && cfg.MaxMessageBytes == 1024 && cfg.RetentionTime == time.Hour
		})
	}
	big := log.Record{Topic: "cfg", Value: make([]byte, 4096)}
	produce := func(b *replica.Broker, r log.Record) error {
		p, err := log.NewProducer(b, log.ProducerConfig{Acks: log.AcksAll, Timeout: 20 * time.Second})
		require.NoError(t, err)
		defer p.Close()
		_, err = p.Send(ctx, r)
		return err
	}
	require.ErrorIs(t, produce(c.any(), big), log.ErrRecordTooLarge)

	for _, bad := range []struct {
		o    log.TopicConfig
		want error
	}{
		{log.TopicConfig{MinInSyncReplicas: 1, RetentionTime: time.Hour, MaxMessageBytes: 1024}, log.ErrInvalidConfig},
		{log.TopicConfig{SegmentBytes: 1}, log.ErrInvalidConfig},
		{log.TopicConfig{Partitions: 3}, log.ErrInvalidConfig},
	} {
		require.ErrorIs(t, admin.AlterTopicConfig("cfg", bad.o), bad.want, "%+v", bad.o)
	}
	require.ErrorIs(t, admin.AlterTopicConfig("nope", log.TopicConfig{}), log.ErrUnknownTopic)
	got, err := admin.TopicOverrides("cfg")
	require.NoError(t, err)
	require.Equal(t, o, got, "a refused change changed the overrides")

	// The leader stops: the new one (a follower that applied the change
	// to its log) enforces it; and so does the old one, restarted.
	old := c.leader("cfg", 0)
	c.stop(old)
	require.ErrorIs(t, produce(c.any(), big), log.ErrRecordTooLarge)
	c.start(old)
	c.waitLive(3)

	// Back to the default: the big record goes in.
	o.MaxMessageBytes = 0
	require.NoError(t, admin.AlterTopicConfig("cfg", o))
	for _, b := range c.members {
		c.waitImage(b, "the default again", func(*controller.Image) bool {
			cfg, _ := b.TopicConfig("cfg")
			return cfg.MaxMessageBytes == log.TopicConfig{}.WithDefaults().MaxMessageBytes
		})
	}
	require.NoError(t, produce(c.any(), big))

	// DeleteRecords at the leader, asked of another member.
	for i := range 9 {
		require.NoError(t, produce(c.any(), log.Record{Topic: "cfg", Value: fmt.Appendf(nil, "%d", i)}))
	}
	tp := log.TopicPartition{Topic: "cfg", Partition: 0}
	admin = c.any(c.leader("cfg", 0))
	low, err := admin.DeleteRecords(ctx, tp, 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), low)
	var oor *log.OffsetOutOfRangeError
	_, err = admin.DeleteRecords(ctx, tp, 99)
	require.True(t, errors.As(err, &oor), "past the high watermark: %v", err)
	_, err = admin.DeleteRecords(ctx, log.TopicPartition{Topic: "__consumer_offsets"}, 1)
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	for _, b := range c.members {
		start, err := b.ListOffset(ctx, tp, log.EarliestOffset)
		require.NoError(t, err)
		require.Equal(t, int64(5), start, "member %d routes to the leader", b.ID())
		// Every replica's own log start follows.
		deadline := time.Now().Add(30 * time.Second)
		for {
			p, err := b.Partition("cfg", 0)
			require.NoError(t, err)
			if p.StartOffset() == 5 {
				break
			}
			require.True(t, time.Now().Before(deadline), "member %d's log start %d", b.ID(), p.StartOffset())
			time.Sleep(20 * time.Millisecond) // polling another goroutine's fetches
		}
	}
}
