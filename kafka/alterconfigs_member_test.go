package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// A member serves the legacy AlterConfigs and IncrementalAlterConfigs of
// its topics' log configs (through the controller: every member has
// them), the legacy one replacing a topic's configs whole, throttles
// included; and DeleteRecords at the partition's leader.
func TestMemberTopicConfigsAndDeleteRecords(t *testing.T) {
	leaktest.Check(t)
	members := startAdminCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{members[2].Addr()}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.CreateTopic(ctx, "t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 1}))
	waitPartition(ctx, t, members, "t", 0, func(s controller.PartitionState) bool { return s.Leader != controller.NoLeader })

	legacy := func(kvs ...string) {
		t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		for i := 0; i+1 < len(kvs); i += 2 {
			kv := kmsg.NewAlterConfigsRequestResourceConfig()
			kv.Name, kv.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
			rr.Configs = append(rr.Configs, kv)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := c.Request(ctx, req, 2)
		require.NoError(t, err)
		r := resp.(*kmsg.AlterConfigsResponse).Resources[0]
		if r.ErrorCode != 0 {
			t.Fatalf("AlterConfigs %v: code %d: %s", kvs, r.ErrorCode, *r.ErrorMessage)
		}
	}
	waitAll := func(what string, ok func(log.TopicConfig, map[string]string) bool) {
		t.Helper()
		for _, m := range members {
			img := m.Image()
			for {
				tp, _ := img.Topic("t")
				cfg, _ := m.TopicConfig("t")
				if ok(cfg, tp.Configs) {
					break
				}
				img, err = m.WaitImage(ctx, img.Version())
				require.NoError(t, err, what)
			}
		}
	}

	legacy("retention.ms", "60000", kafka.LeaderThrottledReplicasConfig, "*")
	waitAll("retention and a throttle", func(cfg log.TopicConfig, all map[string]string) bool {
		return cfg.RetentionTime == time.Minute && all[kafka.LeaderThrottledReplicasConfig] == "*"
	})
	got := describeConfigs(ctx, t, c, kmsg.ConfigResourceTypeTopic, "t")
	require.Equal(t, "60000", *got["retention.ms"].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, got["retention.ms"].Source)
	require.False(t, got["retention.ms"].ReadOnly)

	legacy("segment.bytes", "1048576")
	def := log.TopicConfig{}.WithDefaults()
	waitAll("replaced whole", func(cfg log.TopicConfig, all map[string]string) bool {
		_, throttled := all[kafka.LeaderThrottledReplicasConfig]
		return cfg.SegmentBytes == 1<<20 && cfg.RetentionTime == def.RetentionTime && !throttled
	})

	require.NoError(t, c.AlterTopicConfigs(ctx, "t", []kafka.ConfigChange{{Name: "cleanup.policy", Value: "compact,delete"}}))
	waitAll("incremental", func(cfg log.TopicConfig, _ map[string]string) bool {
		return cfg.Cleanup == log.CleanupCompactDelete && cfg.SegmentBytes == 1<<20
	})
	require.ErrorIs(t, c.AlterTopicConfigs(ctx, "t", []kafka.ConfigChange{{Name: "min.insync.replicas", Value: "2"}}), log.ErrInvalidConfig)

	p, err := log.NewProducer(c, log.ProducerConfig{Acks: log.AcksAll})
	require.NoError(t, err)
	for range 5 {
		_, err := p.Send(ctx, log.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")})
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	low, err := c.DeleteRecords(ctx, log.TopicPartition{Topic: "t"}, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), low)
	start, err := c.ListOffset(ctx, log.TopicPartition{Topic: "t"}, log.EarliestOffset)
	require.NoError(t, err)
	require.Equal(t, int64(2), start)
}
