package kafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// TestDescribeTxnConfigs: DescribeConfigs of the broker shows the
// transaction coordinator's settings, read-only: Kafka's defaults, or the
// values the broker was started with (STATIC_BROKER_CONFIG); the
// cluster-wide resource does not; AlterConfigs refuses them.
func TestDescribeTxnConfigs(t *testing.T) {
	s, _, _ := start(t, Config{NodeID: 3}, logtest.WithConfig(log.Config{TransactionMaxTimeout: 2 * time.Minute}))
	c := dial(t, s.Addr())
	describe := func(name string, names ...string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = brokerRes, name, names
		req.Resources = append(req.Resources, rr)
		resp := c.do(req).(*kmsg.DescribeConfigsResponse)
		require.Equal(t, errNone, resp.Resources[0].ErrorCode)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, rc := range resp.Resources[0].Configs {
			out[rc.Name] = rc
		}
		return out
	}
	all := describe("3")
	for name, want := range map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"transaction.max.timeout.ms":                                  {"120000", kmsg.ConfigSourceStaticBrokerConfig},
		"transactional.id.expiration.ms":                              {"604800000", kmsg.ConfigSourceDefaultConfig},
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": {"10000", kmsg.ConfigSourceDefaultConfig},
		"transaction.remove.expired.transaction.cleanup.interval.ms":  {"3600000", kmsg.ConfigSourceDefaultConfig},
	} {
		rc, ok := all[name]
		require.True(t, ok, name)
		require.Equal(t, want.value, *rc.Value, name)
		require.Equal(t, want.source, rc.Source, name)
		require.True(t, rc.ReadOnly, name)
		require.Equal(t, kmsg.ConfigTypeInt, rc.ConfigType, name)
	}
	one := describe("3", "transaction.max.timeout.ms")
	require.Len(t, one, 1)
	require.Contains(t, one, "transaction.max.timeout.ms")
	require.NotContains(t, describe(""), "transaction.max.timeout.ms", "the cluster-wide resource has only dynamic defaults")
	require.Equal(t, []int16{errInvalidConfig}, legacyAlter(c, 1, false, legacyRes(brokerRes, "3", "transaction.max.timeout.ms", "60000")))
}
