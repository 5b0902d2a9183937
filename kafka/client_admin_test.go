package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

// adminClient is what adminScenario drives: the admin verbs and the data
// plane (to have records to delete), as *log.Broker and *Client both are.
type adminClient interface {
	log.Admin
	log.DataClient
}

// adminScenario is one program's admin code: it runs unchanged against
// any adminClient and returns what it saw, for the callers to compare.
func adminScenario(t *testing.T, a adminClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen []string
	note := func(format string, args ...any) { seen = append(seen, fmt.Sprintf(format, args...)) }

	require.NoError(t, a.CreateTopicContext(ctx, "adm", log.TopicConfig{Partitions: 2, RetentionTime: 2 * time.Hour, Cleanup: log.CleanupCompactDelete}))
	require.ErrorIs(t, a.CreateTopicContext(ctx, "adm", log.TopicConfig{}), log.ErrTopicExists)
	require.ErrorIs(t, a.CreateTopicContext(ctx, "bad name!", log.TopicConfig{}), log.ErrInvalidTopic)
	require.ErrorIs(t, a.CreateTopicContext(ctx, "badcfg", log.TopicConfig{SegmentBytes: 5}), log.ErrInvalidConfig)
	_, err := a.Partitions(ctx, "badcfg")
	require.ErrorIs(t, err, log.ErrUnknownTopic, "a refused creation creates nothing")

	n, err := a.Partitions(ctx, "adm")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	cfg, err := a.TopicConfig("adm")
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Partitions)
	require.Equal(t, 2*time.Hour, cfg.RetentionTime)
	require.Equal(t, log.CleanupCompactDelete, cfg.Cleanup)
	note("config %+v", cfg)
	o, err := a.TopicOverrides("adm")
	require.NoError(t, err)
	require.Equal(t, 2*time.Hour, o.RetentionTime)
	require.Equal(t, log.CleanupCompactDelete, o.Cleanup)
	note("overrides %+v", o)

	// Alter replaces what is set: retention and cleanup back to defaults.
	require.NoError(t, a.AlterTopicConfig("adm", log.TopicConfig{MaxMessageBytes: 1000}))
	cfg, err = a.TopicConfig("adm")
	require.NoError(t, err)
	require.Equal(t, 1000, cfg.MaxMessageBytes)
	require.Equal(t, log.CleanupDelete, cfg.Cleanup)
	require.Equal(t, 7*24*time.Hour, cfg.RetentionTime)
	note("altered %+v", cfg)
	require.ErrorIs(t, a.AlterTopicConfig("adm", log.TopicConfig{SegmentBytes: 5}), log.ErrInvalidConfig)
	require.ErrorIs(t, a.AlterTopicConfig("nope", log.TopicConfig{MaxMessageBytes: 1000}), log.ErrUnknownTopic)
	cfg2, err := a.TopicConfig("adm")
	require.NoError(t, err)
	require.Equal(t, cfg, cfg2, "a refused alter changes nothing")

	require.NoError(t, a.CreatePartitions(ctx, "adm", 3))
	require.ErrorIs(t, a.CreatePartitions(ctx, "adm", 2), log.ErrInvalidPartitions)
	require.ErrorIs(t, a.CreatePartitions(ctx, "nope", 2), log.ErrUnknownTopic)
	n, err = a.Partitions(ctx, "adm")
	require.NoError(t, err)
	require.Equal(t, 3, n)

	tp := log.TopicPartition{Topic: "adm", Partition: 2}
	for range 3 {
		_, err := a.Produce(ctx, tp, records("a", "b", "c"), log.AcksAll)
		require.NoError(t, err)
	}
	low, err := a.DeleteRecords(ctx, tp, 4)
	require.NoError(t, err)
	require.Equal(t, int64(4), low)
	start, err := a.ListOffset(ctx, tp, log.EarliestOffset)
	require.NoError(t, err)
	require.Equal(t, int64(4), start)
	_, err = a.DeleteRecords(ctx, tp, 100)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	low, err = a.DeleteRecords(ctx, tp, -1)
	require.NoError(t, err)
	require.Equal(t, int64(9), low, "-1: up to the high watermark")
	note("low watermark %d", low)

	require.NoError(t, a.DeleteTopicContext(ctx, "adm"))
	require.ErrorIs(t, a.DeleteTopicContext(ctx, "adm"), log.ErrUnknownTopic)
	_, err = a.TopicConfig("adm")
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	_, err = a.Partitions(ctx, "adm")
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	return seen
}

// The same admin code against a log.Broker in process and against a
// Client over the network to a served log.Broker: the same outcomes, the
// same errors.
func TestClientAdminSameAsBroker(t *testing.T) {
	leaktest.Check(t)
	_, direct, _ := start(t, Config{})
	want := adminScenario(t, direct)

	s, served, _ := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	got := adminScenario(t, c)
	require.Equal(t, want, got)
	require.Empty(t, served.Topics())
}

// ListTopics lists the cluster's topics; the Client's admin errors carry
// the broker's message.
func TestClientListTopics(t *testing.T) {
	s, b, _ := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.CreateTopic(ctx, "b", log.TopicConfig{}))
	require.NoError(t, c.CreateTopic(ctx, "a", log.TopicConfig{Partitions: 4}))
	names, err := c.ListTopics(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, b.Topics(), names)
	require.ElementsMatch(t, []string{"a", "b"}, names)
	n, err := c.Partitions(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 4, n)

	err = c.CreateTopic(ctx, "c", log.TopicConfig{SegmentBytes: 5})
	require.ErrorIs(t, err, log.ErrInvalidConfig)
	require.ErrorContains(t, err, "segment.bytes")
}
