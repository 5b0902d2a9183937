package kafka

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

// TestTopicConfigTable: the table is sorted (it is binary searched), and
// every config sets what it describes: a value set reads back the same,
// is set on the overrides, and DeleteTopicConfig makes it the default.
func TestTopicConfigTable(t *testing.T) {
	require.True(t, slices.IsSortedFunc(topicConfigTable, func(a, b topicConfigDef) int { return strings.Compare(a.name, b.name) }))
	samples := map[string]string{
		"cleanup.policy": "compact,delete", "compression.type": "lz4", "delete.retention.ms": "5000",
		"flush.messages": "10", "flush.ms": "2000", "index.interval.bytes": "1024", "max.compaction.lag.ms": "60000",
		"max.message.bytes": "2048", "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "1000",
		"min.insync.replicas": "2", "retention.bytes": "1048576", "retention.ms": "3600000", "segment.bytes": "65536",
		"segment.index.bytes": "4096", "segment.ms": "600000",
	}
	defaults := log.TopicConfig{}.WithDefaults()
	for i := range topicConfigTable {
		d := &topicConfigTable[i]
		if d.name == "message.timestamp.type" {
			require.NoError(t, SetTopicConfig(&log.TopicConfig{}, d.name, "CreateTime"))
			require.ErrorIs(t, SetTopicConfig(&log.TopicConfig{}, d.name, "LogAppendTime"), log.ErrInvalidConfig)
			continue
		}
		v, ok := samples[d.name]
		require.True(t, ok, "no sample for %s", d.name)
		var o log.TopicConfig
		require.NoError(t, SetTopicConfig(&o, d.name, v), d.name)
		require.True(t, d.isSetOn(o), d.name)
		require.Equal(t, v, d.get(o.WithDefaults()), d.name)
		require.NotEqual(t, v, d.get(defaults), "%s: the sample is the default", d.name)
		full := o.WithDefaults()
		full.ReplicationFactor = 3 // room for min.insync.replicas 2
		require.NoError(t, full.Validate(), d.name)
		require.NoError(t, DeleteTopicConfig(&o, d.name))
		require.Equal(t, log.TopicConfig{}, o, d.name)
		// A bad value changes nothing.
		before := o
		err := SetTopicConfig(&o, d.name, "not a value")
		require.ErrorIs(t, err, log.ErrInvalidConfig, d.name)
		require.Equal(t, before, o)
	}
	// Kafka's special values.
	for _, c := range []struct{ name, value, reads string }{
		{"retention.ms", "-1", "-1"}, {"retention.bytes", "-1", "-1"},
		{"flush.messages", "9223372036854775807", "9223372036854775807"},
		{"max.compaction.lag.ms", "9223372036854775807", "9223372036854775807"},
		{"cleanup.policy", "delete, compact", "compact,delete"},
		{"compression.type", "uncompressed", "uncompressed"},
	} {
		var o log.TopicConfig
		require.NoError(t, SetTopicConfig(&o, c.name, c.value), c.name)
		d, _ := topicConfigDefOf(c.name)
		require.Equal(t, c.reads, d.get(o.WithDefaults()), c.name)
	}
	for _, bad := range [][2]string{{"segment.bytes", "0"}, {"segment.bytes", "13"}, {"segment.bytes", "2147483648"},
		{"retention.ms", "-2"}, {"flush.messages", "0"}, {"index.interval.bytes", "-1"}, {"delete.retention.ms", "-1"},
		{"retention.bytes", "0"}, {"min.cleanable.dirty.ratio", "1.5"},
		{"cleanup.policy", ""}, {"max.message.bytes", "-5"}, {"no.such", "1"}} {
		require.True(t, errors.Is(SetTopicConfig(&log.TopicConfig{}, bad[0], bad[1]), log.ErrInvalidConfig), "%v", bad)
	}
	require.NoError(t, SetTopicConfig(&log.TopicConfig{}, "preallocate", "true"), "accepted, not acted on")
}
