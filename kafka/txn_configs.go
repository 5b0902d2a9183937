package kafka

import (
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// TxnConfiger is a Backend whose transaction coordinator has settings
// (*log.Broker): DescribeConfigs of the broker shows them, read-only, as
// Kafka's static broker configs.
type TxnConfiger interface {
	TxnConfig() log.TxnConfig
}

var _ TxnConfiger = (*log.Broker)(nil)

// describeTxnConfigs lists the transaction coordinator's settings for
// DescribeConfigs of this broker (not of the cluster-wide resource, which
// holds only dynamic defaults): those named, or all.
func (s *Server) describeTxnConfigs(rr kmsg.DescribeConfigsRequestResource, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	tc := s.caps.txnConfigs
	if tc == nil || rr.ResourceName == "" {
		return nil
	}
	if _, err := s.brokerScope(rr.ResourceName); err != nil {
		return nil // answered by describeBrokerConfigs
	}
	c := tc.TxnConfig()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range []struct {
		name string
		v    time.Duration
		set  bool
	}{
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", c.AbortTimedOutInterval, c.AbortTimedOutSet},
		{"transaction.max.timeout.ms", c.MaxTimeout, c.MaxTimeoutSet},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", c.RemoveExpiredInterval, c.IDExpirationSet && c.RemoveExpiredInterval < time.Hour},
		{"transactional.id.expiration.ms", c.IDExpiration, c.IDExpirationSet},
	} {
		if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.name) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.ConfigType, rc.ReadOnly = e.name, kmsg.ConfigTypeInt, true
		rc.Value = kmsg.StringPtr(strconv.FormatInt(e.v.Milliseconds(), 10))
		rc.Source, rc.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		if e.set {
			rc.Source, rc.IsDefault = kmsg.ConfigSourceStaticBrokerConfig, false
		}
		if synonyms {
			sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sy.Name, sy.Value, sy.Source = rc.Name, rc.Value, rc.Source
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, sy)
		}
		out = append(out, rc)
	}
	return out
}
