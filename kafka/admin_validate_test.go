package kafka

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/vfs"
)

// dataDirWithMinInSync is a data dir whose topics.json, written before
// min.insync.replicas above the replication factor was refused, has topic
// with a min.insync.replicas of n on one replica: the only way left to
// have a standalone broker answer NOT_ENOUGH_REPLICAS.
func dataDirWithMinInSync(t *testing.T, topic string, n int) logtest.Option {
	t.Helper()
	cfg := log.TopicConfig{MinInSyncReplicas: n}.WithDefaults()
	raw, err := json.Marshal(map[string]any{"version": 1, "topics": map[string]log.TopicConfig{topic: cfg}})
	require.NoError(t, err)
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/strata", 0o755))
	require.NoError(t, vfs.WriteFileAtomic(mem, "/strata/"+log.TopicsFile, raw))
	return logtest.OnFS(mem)
}

// invalidWireConfigs are topic configs Kafka refuses (its LogConfig's
// bounds), each with a piece of the reason the answer must give.
var invalidWireConfigs = []struct{ name, value, reason string }{
	{"segment.bytes", "1", "14 to 2147483647"}, // issue 25: 6,000 one-record segments
	{"segment.bytes", "13", "14 to 2147483647"},
	{"segment.bytes", "2147483648", "14 to 2147483647"},
	{"retention.ms", "-5", "-1 (forever) or more"}, // issue 25
	{"segment.ms", "0", "1 or more"},
	{"segment.index.bytes", "3", "segment.index.bytes 3 < 24"},
	{"index.interval.bytes", "-1", "0 to 2147483647"},
	{"max.message.bytes", "-1", "1 to 2147483647"},
	{"min.insync.replicas", "0", "1 to 2147483647"},
	{"min.insync.replicas", "2", "above the replication factor"}, // issue 25: every acks=all produce blocked
	{"min.cleanable.dirty.ratio", "1.01", "(0, 1]"},
	{"delete.retention.ms", "-1", "0 or more"},
	{"flush.messages", "0", "1 or more"},
	{"flush.ms", "-1", "0 or more"},
	{"max.compaction.lag.ms", "0", "1 or more"},
	{"cleanup.policy", "shred", "delete and compact"},
	{"compression.type", "brotli", "zstd"},
}

// TestTopicConfigValidationOverTheWire: CreateTopics (and its validate
// only), and IncrementalAlterConfigs (and its validate only) refuse each
// of Kafka's invalid configs with INVALID_CONFIG and a message that says
// why, and change nothing; the bounds themselves are taken.
func TestTopicConfigValidationOverTheWire(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	before := describeTopic(t, c, 4, "t")
	set := kmsg.IncrementalAlterConfigOpSet
	for _, tc := range invalidWireConfigs {
		what := tc.name + "=" + tc.value
		for _, validateOnly := range []bool{false, true} {
			resp := c.do(createReq(5, validateOnly, newTopic("new", 1, -1, tc.name, tc.value))).(*kmsg.CreateTopicsResponse)
			require.Equal(t, errInvalidConfig, resp.Topics[0].ErrorCode, "create %s", what)
			require.NotNil(t, resp.Topics[0].ErrorMessage, what)
			require.Contains(t, *resp.Topics[0].ErrorMessage, tc.reason, what)
			require.NotContains(t, b.Topics(), "new", what)

			ar := c.do(alterReq(1, validateOnly, alterOps(kmsg.ConfigResourceTypeTopic, "t", set, tc.name, tc.value))).(*kmsg.IncrementalAlterConfigsResponse)
			require.Equal(t, errInvalidConfig, ar.Resources[0].ErrorCode, "alter %s", what)
			require.NotNil(t, ar.Resources[0].ErrorMessage, what)
			require.Contains(t, *ar.Resources[0].ErrorMessage, tc.reason, what)
			require.Equal(t, before, describeTopic(t, c, 4, "t"), "%s: nothing changed", what)
		}
	}
	// Kafka's bounds are valid.
	for _, kv := range [][2]string{{"segment.bytes", "14"}, {"retention.ms", "-1"}, {"retention.bytes", "-5"},
		{"segment.ms", "1"}, {"index.interval.bytes", "0"}, {"delete.retention.ms", "0"}, {"flush.messages", "1"},
		{"min.insync.replicas", "1"}, {"min.cleanable.dirty.ratio", "1"}} {
		resp := c.do(createReq(5, false, newTopic("edge", 1, -1, kv[0], kv[1]))).(*kmsg.CreateTopicsResponse)
		require.Equal(t, errNone, resp.Topics[0].ErrorCode, "%v", kv)
		ar := c.do(alterReq(1, false, alterOps(kmsg.ConfigResourceTypeTopic, "edge", set, kv[0], kv[1]))).(*kmsg.IncrementalAlterConfigsResponse)
		require.Equal(t, errNone, ar.Resources[0].ErrorCode, "%v", kv)
		require.NoError(t, b.DeleteTopic("edge"))
	}
	// delete.retention.ms=0 and index.interval.bytes=0 read back as 0.
	resp := c.do(createReq(5, false, newTopic("zeros", 1, -1, "delete.retention.ms", "0"))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode)
	require.Equal(t, "0", describeTopic(t, c, 4, "zeros")["delete.retention.ms"].value)
}
