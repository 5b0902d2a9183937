package kafka

import (
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyRes is one AlterConfigs resource; kvs are name, value pairs ("\x00"
// for a null value).
func legacyRes(typ kmsg.ConfigResourceType, name string, kvs ...string) kmsg.AlterConfigsRequestResource {
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name = kvs[i]
		if kvs[i+1] != "\x00" {
			c.Value = kmsg.StringPtr(kvs[i+1])
		}
		rr.Configs = append(rr.Configs, c)
	}
	return rr
}

func legacyAlter(c *testClient, v int16, validateOnly bool, rs ...kmsg.AlterConfigsRequestResource) []int16 {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(v)
	req.ValidateOnly, req.Resources = validateOnly, rs
	resp := c.do(req).(*kmsg.AlterConfigsResponse)
	var codes []int16
	for _, r := range resp.Resources {
		codes = append(codes, r.ErrorCode)
	}
	return codes
}

const topicRes, brokerRes = kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker

func TestLegacyAlterConfigsTopics(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, RetentionTime: time.Hour, Cleanup: log.CleanupCompact}))
	c := dial(t, s.Addr())
	overrides := func() log.TopicConfig {
		o, err := b.TopicOverrides("t")
		require.NoError(t, err)
		return o
	}
	before := overrides()
	require.Equal(t, time.Hour, before.RetentionTime)

	for v := int16(0); v <= 2; v++ {
		// Bad input: each refused with its code, nothing changes.
		require.Equal(t, []int16{errInvalidConfig}, legacyAlter(c, v, false, legacyRes(topicRes, "t", "no.such.config", "1")))
		require.Equal(t, []int16{errInvalidConfig}, legacyAlter(c, v, false, legacyRes(topicRes, "t", "retention.ms", "soon")))
		require.Equal(t, []int16{errInvalidRequest}, legacyAlter(c, v, false, legacyRes(topicRes, "t", "retention.ms", "\x00")))
		require.Equal(t, []int16{errInvalidRequest}, legacyAlter(c, v, false, legacyRes(topicRes, "t", "segment.ms", "1", "segment.ms", "2")))
		require.Equal(t, []int16{errInvalidRequest, errInvalidRequest}, legacyAlter(c, v, false, legacyRes(topicRes, "t"), legacyRes(topicRes, "t")))
		require.Equal(t, []int16{errUnknownTopicOrPartition}, legacyAlter(c, v, false, legacyRes(topicRes, "nope")))
		require.Equal(t, []int16{errInvalidTopicException}, legacyAlter(c, v, false, legacyRes(topicRes, "bad/name")))
		require.Equal(t, []int16{errInvalidRequest}, legacyAlter(c, v, false, legacyRes(kmsg.ConfigResourceTypeBrokerLogger, "0")))
		require.Equal(t, []int16{errInvalidRequest}, legacyAlter(c, v, false, legacyRes(kmsg.ConfigResourceTypeGroupConfig, "g")))
		require.Equal(t, before, overrides())
		// validate_only: checked, not applied.
		require.Equal(t, []int16{errNone}, legacyAlter(c, v, true, legacyRes(topicRes, "t", "segment.ms", "60000")))
		require.Equal(t, before, overrides())
	}
	// The whole set is replaced: retention.ms and cleanup.policy, not
	// sent, are the defaults again.
	require.Equal(t, []int16{errNone}, legacyAlter(c, 2, false, legacyRes(topicRes, "t", "segment.ms", "60000", "preallocate", "true")))
	require.Equal(t, log.TopicConfig{SegmentTime: time.Minute}, overrides())
	cfg, err := b.TopicConfig("t")
	require.NoError(t, err)
	require.Equal(t, log.CleanupDelete, cfg.Cleanup)
	require.Equal(t, []int16{errNone}, legacyAlter(c, 1, false, legacyRes(topicRes, "t")))
	require.Equal(t, log.TopicConfig{}, overrides())
}

func TestLegacyAlterConfigsBroker(t *testing.T) {
	s, b, _ := start(t, Config{NodeID: 3}, logtest.Topic("t", 1), logtest.TopicWithConfig("own", log.TopicConfig{Partitions: 1, RetentionTime: time.Minute}))
	c := dial(t, s.Addr())
	retention := func(topic string) time.Duration {
		cfg, err := b.TopicConfig(topic)
		require.NoError(t, err)
		return cfg.RetentionTime
	}
	week := retention("t")

	// Bad input changes nothing.
	for _, rr := range []struct {
		res  kmsg.AlterConfigsRequestResource
		code int16
	}{
		{legacyRes(brokerRes, "7", "log.retention.ms", "1000"), errInvalidRequest},
		{legacyRes(brokerRes, "x", "log.retention.ms", "1000"), errInvalidRequest},
		{legacyRes(brokerRes, "", "log.dirs", "/tmp"), errInvalidConfig},
		{legacyRes(brokerRes, "", "no.such.config", "1"), errInvalidConfig},
		{legacyRes(brokerRes, "", "log.retention.ms", "-7"), errInvalidConfig},
		{legacyRes(brokerRes, "", "log.segment.bytes", "1"), errInvalidConfig},
		{legacyRes(brokerRes, "", "log.retention.ms", "1000", "log.dirs", "/tmp"), errInvalidConfig},
	} {
		require.Equal(t, []int16{rr.code}, legacyAlter(c, 1, false, rr.res), "%v", rr.res)
		require.Equal(t, week, retention("t"))
		require.Equal(t, log.TopicConfig{}, b.TopicDefaults(log.ClusterDefaults))
	}
	require.Equal(t, []int16{errNone}, legacyAlter(c, 1, true, legacyRes(brokerRes, "", "log.retention.ms", "3600000")))
	require.Equal(t, week, retention("t"), "validate only")

	// The cluster's set, then this node's over it; topics that set their
	// own keep it.
	require.Equal(t, []int16{errNone}, legacyAlter(c, 1, false, legacyRes(brokerRes, "", "log.retention.ms", "3600000", "log.segment.bytes", "1048576")))
	require.Equal(t, time.Hour, retention("t"))
	require.Equal(t, time.Minute, retention("own"))
	require.Equal(t, []int16{errNone}, legacyAlter(c, 2, false, legacyRes(brokerRes, "3", "log.retention.ms", "7200000")))
	require.Equal(t, 2*time.Hour, retention("t"))

	describe := func(name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = brokerRes, name
		req.Resources = append(req.Resources, rr)
		resp := c.do(req).(*kmsg.DescribeConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, rc := range resp.Resources[0].Configs {
			out[rc.Name] = rc
		}
		return out
	}
	node := describe("3")
	require.Equal(t, "7200000", *node["log.retention.ms"].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, node["log.retention.ms"].Source)
	require.Equal(t, "1048576", *node["log.segment.bytes"].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, node["log.segment.bytes"].Source)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, node["log.cleanup.policy"].Source)
	require.Len(t, describe(""), 2, "the cluster-wide resource: what is set on it")

	// Replaced whole: the node's set emptied, the cluster's shows again.
	require.Equal(t, []int16{errNone}, legacyAlter(c, 0, false, legacyRes(brokerRes, "3")))
	require.Equal(t, time.Hour, retention("t"))
}

func TestAuthorizeLegacyAlterConfigs(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpAlterConfigs, acl.Topic("orders")))
	codes := legacyAlter(a.as("alice"), 1, false,
		legacyRes(topicRes, "orders", "retention.ms", "60000"),
		legacyRes(topicRes, "secret", "retention.ms", "60000"),
		legacyRes(brokerRes, "", "log.retention.ms", "60000"))
	require.Equal(t, []int16{errNone, errTopicAuthorizationFailed, errClusterAuthorizationFailed}, codes)
	o, err := a.b.TopicOverrides("secret")
	require.NoError(t, err)
	require.Equal(t, log.TopicConfig{}, o)
	require.Equal(t, log.TopicConfig{}, a.b.TopicDefaults(log.ClusterDefaults))
	o, err = a.b.TopicOverrides("orders")
	require.NoError(t, err)
	require.Equal(t, time.Minute, o.RetentionTime)
}

func incAlter(c *testClient, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = brokerRes, name, ops
	req.Resources = append(req.Resources, rr)
	return c.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
}

func incOp(name string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, op
	if value != "\x00" {
		c.Value = kmsg.StringPtr(value)
	}
	return c
}

// TestIncrementalAlterBrokerConfigs: IncrementalAlterConfigs changes the
// dynamic broker configs one by one (kadm's AlterBrokerConfigs).
func TestIncrementalAlterBrokerConfigs(t *testing.T) {
	s, b, _ := start(t, Config{NodeID: 1}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	require.Equal(t, errNone, incAlter(c, "", incOp("log.retention.ms", opSet, "60000"), incOp("log.segment.bytes", opSet, "1048576")))
	require.Equal(t, errNone, incAlter(c, "", incOp("log.segment.bytes", opDelete, "\x00")))
	require.Equal(t, log.TopicConfig{RetentionTime: time.Minute}, b.TopicDefaults(log.ClusterDefaults))
	require.Equal(t, errNone, incAlter(c, "1", incOp("log.cleanup.policy", opAppend, "compact")))
	require.Equal(t, log.CleanupCompactDelete, b.TopicDefaults(log.NodeDefaults).Cleanup)
	cfg, err := b.TopicConfig("t")
	require.NoError(t, err)
	require.Equal(t, log.CleanupCompactDelete, cfg.Cleanup)
	require.Equal(t, time.Minute, cfg.RetentionTime)
	// Refused, nothing changes.
	for _, code := range []int16{
		incAlter(c, "", incOp("log.retention.ms", opAppend, "1")),
		incAlter(c, "", incOp("log.dirs", opSet, "/x")),
		incAlter(c, "", incOp("log.retention.ms", opSet, "\x00")),
		incAlter(c, "2", incOp("log.retention.ms", opSet, "1")),
		incAlter(c, "", incOp("log.retention.ms", opSet, "5"), incOp("log.retention.ms", opDelete, "\x00")),
	} {
		require.NotEqual(t, errNone, code)
	}
	require.Equal(t, log.TopicConfig{RetentionTime: time.Minute}, b.TopicDefaults(log.ClusterDefaults))
}

// Both config APIs refuse a resource listed twice, every listing of it
// (INVALID_REQUEST), and answer the others: countResources and repeated,
// which both use.
func TestConfigResourcesListedTwice(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1}), logtest.TopicWithConfig("u", log.TopicConfig{Partitions: 1}))
	c := dial(t, s.Addr())
	require.Equal(t, []int16{errInvalidRequest, errNone, errInvalidRequest},
		legacyAlter(c, 1, false, legacyRes(topicRes, "t", "retention.ms", "1000"), legacyRes(topicRes, "u", "retention.ms", "2000"), legacyRes(topicRes, "t")))
	resp := c.do(alterReq(1, false,
		alterOps(topicRes, "t", opSet, "retention.ms", "1000"),
		alterOps(topicRes, "u", opSet, "retention.ms", "3000"),
		alterOps(topicRes, "t", opDelete, "retention.ms", "<nil>"),
		alterOps(brokerRes, "t", opSet, "retention.ms", "1"), // another type, the same name: not a repeat
	)).(*kmsg.IncrementalAlterConfigsResponse)
	var codes []int16
	for _, r := range resp.Resources {
		codes = append(codes, r.ErrorCode)
	}
	require.Equal(t, []int16{errInvalidRequest, errNone, errInvalidRequest, errInvalidRequest}, codes) // the broker "t": not a broker id
	require.Contains(t, *resp.Resources[0].ErrorMessage, "listed more than once")
	require.NotContains(t, *resp.Resources[3].ErrorMessage, "listed more than once")
	o, err := b.TopicOverrides("t")
	require.NoError(t, err)
	require.Zero(t, o.RetentionTime, "t was refused")
	o, err = b.TopicOverrides("u")
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, o.RetentionTime)

	n := countResources([]string{"a", "b", "a"}, func(s string) (kmsg.ConfigResourceType, string) { return topicRes, s })
	require.ErrorIs(t, n.repeated(topicRes, "a"), errInvalidRequestErr)
	require.NoError(t, n.repeated(topicRes, "b"))
	require.NoError(t, n.repeated(brokerRes, "a"))
}

// DescribeConfigs with include_synonyms lists a dynamic broker config as
// its own synonym, with its value and source (addSelfSynonym).
func TestDescribeBrokerConfigSynonyms(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1}))
	c := dial(t, s.Addr())
	require.Equal(t, []int16{errNone}, legacyAlter(c, 1, false, legacyRes(brokerRes, "", "log.retention.ms", "1000")))
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(1)
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = brokerRes
	req.Resources = append(req.Resources, rr)
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	require.Len(t, resp.Resources, 1)
	require.Len(t, resp.Resources[0].Configs, 1, "the cluster's resource: what is set on it")
	rc := resp.Resources[0].Configs[0]
	require.Equal(t, "log.retention.ms", rc.Name)
	require.Len(t, rc.ConfigSynonyms, 1)
	sy := rc.ConfigSynonyms[0]
	require.Equal(t, "log.retention.ms", sy.Name)
	require.Equal(t, "1000", *sy.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, sy.Source)
}
