package kafka

import (
	"context"
	"testing"

	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createReq(v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(v)
	req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
	req.Topics = topics
	return req
}

func newTopic(name string, parts int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, parts, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func TestCreateDeleteTopics(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("old", 1))
	c := dial(t, s.Addr())
	for v := int16(0); v <= 7; v++ {
		name := "new" + string(rune('0'+v))
		resp := c.do(createReq(v, false,
			newTopic(name, 3, -1, "retention.ms", "3600000", "cleanup.policy", "compact"),
			newTopic("old", 1, 1),
			newTopic("bad/name", 1, 1),
			newTopic("zero", 0, 1),
			newTopic("rf", 1, 0),
			newTopic("cfg", 1, 1, "retention.bytes", "lots"),
			newTopic("unknowncfg", 1, 1, "no.such.config", "1"),
			newTopic("twice", 1, 1), newTopic("twice", 1, 1),
		)).(*kmsg.CreateTopicsResponse)
		require.Len(t, resp.Topics, 9)
		codes := map[string][]int16{}
		for _, rt := range resp.Topics {
			codes[rt.Topic] = append(codes[rt.Topic], rt.ErrorCode)
		}
		require.Equal(t, map[string][]int16{
			name: {0}, "old": {errTopicAlreadyExists}, "bad/name": {errInvalidTopicException},
			"zero": {errInvalidPartitions}, "rf": {errInvalidReplicationFactor},
			"cfg": {errInvalidConfig}, "unknowncfg": {errInvalidConfig},
			"twice": {errInvalidRequest, errInvalidRequest},
		}, codes, "v%d", v)
		if v >= 5 {
			require.Equal(t, int32(3), resp.Topics[0].NumPartitions)
			require.Equal(t, int16(1), resp.Topics[0].ReplicationFactor)
			require.NotEmpty(t, resp.Topics[0].Configs)
		}
		if v >= 7 {
			require.Equal(t, topicID(name), resp.Topics[0].TopicID)
		}
		cfg, err := b.TopicConfig(name)
		require.NoError(t, err)
		require.Equal(t, 3, cfg.Partitions)
		require.Equal(t, "compact", cfg.Cleanup.String())
		require.Equal(t, int64(3600000), cfg.RetentionTime.Milliseconds())
	}
	// A standalone broker has one replica of everything.
	resp := c.do(createReq(7, false, newTopic("rf3", 1, 3))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errInvalidReplicationFactor, resp.Topics[0].ErrorCode)
	resp = c.do(createReq(7, true, newTopic("rf3", 1, 3))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errInvalidReplicationFactor, resp.Topics[0].ErrorCode, "validate only")

	// Validate only: checked, not created.
	resp = c.do(createReq(4, true, newTopic("dry", 2, 1), newTopic("old", 1, 1))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode)
	require.Equal(t, errTopicAlreadyExists, resp.Topics[1].ErrorCode)
	_, err := b.Partitions(context.Background(), "dry")
	require.Error(t, err)

	for v := int16(0); v <= 6; v++ {
		name := "new" + string(rune('0'+v))
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(v)
		if v >= 6 {
			req.Topics = append(req.Topics, []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(name)}, {TopicID: topicID("new7")}, {TopicID: [16]byte{1}}}...)
		} else {
			req.TopicNames = []string{name, "missing"}
		}
		resp := c.do(req).(*kmsg.DeleteTopicsResponse)
		require.Equal(t, errNone, resp.Topics[0].ErrorCode, "v%d", v)
		if v >= 6 {
			require.Equal(t, errNone, resp.Topics[1].ErrorCode)
			require.Equal(t, "new7", *resp.Topics[1].Topic)
			require.Equal(t, errUnknownTopicID, resp.Topics[2].ErrorCode)
		} else {
			require.Equal(t, errUnknownTopicOrPartition, resp.Topics[1].ErrorCode)
		}
	}
	require.Equal(t, []string{"old"}, b.Topics())
}

func TestDescribeConfigs(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(v)
		for _, r := range []struct {
			typ   kmsg.ConfigResourceType
			name  string
			names []string
		}{
			{kmsg.ConfigResourceTypeTopic, "t", nil},
			{kmsg.ConfigResourceTypeTopic, "t", []string{"retention.ms", "max.message.bytes"}},
			{kmsg.ConfigResourceTypeTopic, "missing", nil},
			{kmsg.ConfigResourceTypeBroker, "1", nil},
		} {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = r.typ, r.name, r.names
			req.Resources = append(req.Resources, rr)
		}
		resp := c.do(req).(*kmsg.DescribeConfigsResponse)
		require.Len(t, resp.Resources, 4)
		all := map[string]string{}
		for _, rc := range resp.Resources[0].Configs {
			all[rc.Name] = *rc.Value
		}
		require.Equal(t, "604800000", all["retention.ms"], "v%d", v)
		require.Equal(t, "delete", all["cleanup.policy"])
		require.Len(t, resp.Resources[1].Configs, 2)
		require.Equal(t, errUnknownTopicOrPartition, resp.Resources[2].ErrorCode)
		require.Equal(t, errNone, resp.Resources[3].ErrorCode)
	}
}

func TestDescribeCluster(t *testing.T) {
	s, _, _ := start(t, Config{NodeID: 3, ClusterID: "c1", AdvertisedAddr: "kafka.example:9093"})
	c := dial(t, s.Addr())
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(v)
		resp := c.do(req).(*kmsg.DescribeClusterResponse)
		require.Equal(t, errNone, resp.ErrorCode)
		require.Equal(t, "c1", resp.ClusterID)
		require.Equal(t, int32(3), resp.ControllerID)
		require.Len(t, resp.Brokers, 1)
		require.Equal(t, "kafka.example", resp.Brokers[0].Host)
		require.Equal(t, int32(9093), resp.Brokers[0].Port)
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(1)
	req.EndpointType = 2
	require.Equal(t, errMismatchedEndpointType, c.do(req).(*kmsg.DescribeClusterResponse).ErrorCode)
}
