package kafka_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// describeConfigs returns a resource's configs as DescribeConfigs
// answers them: name → value and source.
func describeConfigs(ctx context.Context, t *testing.T, c *kafka.Client, typ kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	var (
		resp kmsg.Response
		err  error
	)
	if typ == kmsg.ConfigResourceTypeBroker && name != "" {
		// A broker's configs are described by that broker only.
		id, aerr := strconv.Atoi(name)
		require.NoError(t, aerr)
		resp, err = c.RequestBroker(ctx, id, req, 4)
	} else {
		resp, err = c.Request(ctx, req, 4)
	}
	require.NoError(t, err)
	res := resp.(*kmsg.DescribeConfigsResponse).Resources
	require.Len(t, res, 1)
	require.Zero(t, res[0].ErrorCode, "%v", res[0].ErrorMessage)
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range res[0].Configs {
		out[c.Name] = c
	}
	return out
}

// The replication throttles are dynamic configs of a cluster: set on a
// broker, on the cluster's default and on a topic through any member,
// they are in every member's metadata; DescribeConfigs tells where each
// comes from; bad values and configs a member does not have are refused
// and change nothing; the legacy AlterConfigs replaces a resource's
// throttles whole.
func TestClusterThrottleConfigs(t *testing.T) {
	leaktest.Check(t)
	members := startAdminCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, members[0].CreateTopic(ctx, "t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3}))
	dial := func(m *replica.Broker) *kafka.Client {
		c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{m.Addr()}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial(members[0])
	waitAll := func(what string, ok func(*controller.Image) bool) {
		t.Helper()
		for _, m := range members {
			img := m.Image()
			for !ok(img) {
				var err error
				img, err = m.WaitImage(ctx, img.Version())
				require.NoError(t, err, what)
			}
		}
	}

	require.NoError(t, c.AlterBrokerConfigs(ctx, 2, []kafka.ConfigChange{{Name: kafka.LeaderThrottledRateConfig, Value: "1000"}}))
	require.NoError(t, c.AlterBrokerConfigs(ctx, kafka.ClusterDefaults, []kafka.ConfigChange{{Name: kafka.FollowerThrottledRateConfig, Value: "500"}}))
	require.NoError(t, c.AlterTopicConfigs(ctx, "t", []kafka.ConfigChange{{Name: kafka.LeaderThrottledReplicasConfig, Value: "0:1, 1:2"}}))
	waitAll("throttles everywhere", func(img *controller.Image) bool {
		tp, _ := img.Topic("t")
		return img.BrokerConfigs("2")[kafka.LeaderThrottledRateConfig] == "1000" &&
			img.BrokerConfigs("")[kafka.FollowerThrottledRateConfig] == "500" &&
			tp.Configs[kafka.LeaderThrottledReplicasConfig] == "0:1, 1:2"
	})

	for _, bad := range []struct {
		what string
		err  error
		do   func() error
	}{
		{"rate 0", log.ErrInvalidConfig, func() error {
			return c.AlterBrokerConfigs(ctx, 2, []kafka.ConfigChange{{Name: kafka.LeaderThrottledRateConfig, Value: "0"}})
		}},
		{"rate not a number", log.ErrInvalidConfig, func() error {
			return c.AlterBrokerConfigs(ctx, kafka.ClusterDefaults, []kafka.ConfigChange{{Name: kafka.FollowerThrottledRateConfig, Value: "fast"}})
		}},
		{"a bad replica list", log.ErrInvalidConfig, func() error {
			return c.AlterTopicConfigs(ctx, "t", []kafka.ConfigChange{{Name: kafka.FollowerThrottledReplicasConfig, Value: "0-1"}})
		}},
		{"a topic's throttle on a broker", log.ErrInvalidConfig, func() error {
			return c.AlterBrokerConfigs(ctx, 2, []kafka.ConfigChange{{Name: kafka.LeaderThrottledReplicasConfig, Value: "*"}})
		}},
		{"an unknown topic", log.ErrUnknownTopic, func() error {
			return c.AlterTopicConfigs(ctx, "nope", []kafka.ConfigChange{{Name: kafka.LeaderThrottledReplicasConfig, Value: "*"}})
		}},
		{"a throttle with a bad one", log.ErrInvalidConfig, func() error {
			return c.AlterBrokerConfigs(ctx, 2, []kafka.ConfigChange{
				{Name: kafka.FollowerThrottledRateConfig, Value: "9"}, {Name: "log.dirs", Value: "/x"}})
		}},
	} {
		require.ErrorIs(t, bad.do(), bad.err, bad.what)
	}

	// Broker 2 as itself: its own leader rate, the cluster's follower rate.
	c2 := dial(members[1])
	got := describeConfigs(ctx, t, c2, kmsg.ConfigResourceTypeBroker, "2")
	require.Equal(t, "1000", *got[kafka.LeaderThrottledRateConfig].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, got[kafka.LeaderThrottledRateConfig].Source)
	require.Equal(t, "500", *got[kafka.FollowerThrottledRateConfig].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, got[kafka.FollowerThrottledRateConfig].Source)
	require.NotContains(t, got, "log.dirs")
	_, err := c.RequestBroker(ctx, 9, kmsg.NewPtrDescribeConfigsRequest(), 4)
	require.ErrorIs(t, err, log.ErrInvalidConfig, "no broker 9")
	_, err = c.RequestBroker(ctx, kafka.ClusterDefaults, kmsg.NewPtrDescribeConfigsRequest(), 4)
	require.ErrorIs(t, err, log.ErrInvalidConfig, "no broker -1 (not any broker, as for AlterBrokerConfigs)")
	got = describeConfigs(ctx, t, c, kmsg.ConfigResourceTypeBroker, "1")
	require.Equal(t, "9223372036854775807", *got[kafka.LeaderThrottledRateConfig].Value, "broker 1 sets none: Kafka's default")
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got[kafka.LeaderThrottledRateConfig].Source)
	got = describeConfigs(ctx, t, c, kmsg.ConfigResourceTypeTopic, "t")
	require.Equal(t, "0:1, 1:2", *got[kafka.LeaderThrottledReplicasConfig].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, got[kafka.LeaderThrottledReplicasConfig].Source)
	require.Equal(t, "", *got[kafka.FollowerThrottledReplicasConfig].Value)
	require.Contains(t, got, "retention.ms", "the log's configs are still described")

	// The legacy AlterConfigs replaces broker 2's set and the topic's
	// throttles whole: what is not sent goes back to its default.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	for _, r := range []struct {
		typ       kmsg.ConfigResourceType
		name, key string
	}{{kmsg.ConfigResourceTypeBroker, "2", kafka.FollowerThrottledRateConfig}, {kmsg.ConfigResourceTypeTopic, "t", kafka.FollowerThrottledReplicasConfig}} {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		kv := kmsg.NewAlterConfigsRequestResourceConfig()
		kv.Name, kv.Value = r.key, kmsg.StringPtr("*")
		if r.typ == kmsg.ConfigResourceTypeBroker {
			kv.Value = kmsg.StringPtr("2000")
		}
		rr.Configs = append(rr.Configs, kv)
		legacy.Resources = append(legacy.Resources, rr)
	}
	resp, err := c2.RequestBroker(ctx, 2, legacy, 2) // broker 2's resource: broker 2 only
	require.NoError(t, err)
	for _, r := range resp.(*kmsg.AlterConfigsResponse).Resources {
		require.Zero(t, r.ErrorCode, "%s %s: %v", r.ResourceType, r.ResourceName, r.ErrorMessage)
	}
	waitAll("replaced", func(img *controller.Image) bool {
		tp, _ := img.Topic("t")
		_, leader := tp.Configs[kafka.LeaderThrottledReplicasConfig]
		return len(img.BrokerConfigs("2")) == 1 && img.BrokerConfigs("2")[kafka.FollowerThrottledRateConfig] == "2000" &&
			!leader && tp.Configs[kafka.FollowerThrottledReplicasConfig] == "*"
	})

	// Deleted, as --verify does.
	require.NoError(t, c.AlterBrokerConfigs(ctx, 2, []kafka.ConfigChange{{Name: kafka.FollowerThrottledRateConfig, Delete: true}}))
	require.NoError(t, c.AlterBrokerConfigs(ctx, kafka.ClusterDefaults, []kafka.ConfigChange{{Name: kafka.FollowerThrottledRateConfig, Delete: true}}))
	waitAll("deleted", func(img *controller.Image) bool {
		return len(img.BrokerConfigs("2")) == 0 && len(img.BrokerConfigs("")) == 0
	})
}

// A standalone broker replicates nothing: its throttles are refused
// (INVALID_CONFIG, saying so), with the rest of the alteration, and it
// describes none.
func TestStandaloneRefusesThrottles(t *testing.T) {
	srv := kafkatest.New(t, kafkatest.Topic("t", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{srv.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	err = c.AlterBrokerConfigs(ctx, kafka.ClusterDefaults, []kafka.ConfigChange{{Name: "log.retention.ms", Value: "60000"}, {Name: kafka.LeaderThrottledRateConfig, Value: "100"}})
	require.ErrorIs(t, err, log.ErrInvalidConfig)
	require.ErrorContains(t, err, "standalone")
	require.Zero(t, srv.Broker().TopicDefaults(log.ClusterDefaults).RetentionTime, "nothing changed")
	require.ErrorIs(t, c.AlterTopicConfigs(ctx, "t", []kafka.ConfigChange{{Name: kafka.FollowerThrottledReplicasConfig, Value: "*"}}), log.ErrInvalidConfig)
	require.NotContains(t, describeConfigs(ctx, t, c, kmsg.ConfigResourceTypeTopic, "t"), kafka.FollowerThrottledReplicasConfig)
}
