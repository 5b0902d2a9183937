package kafka

import (
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFindCoordinatorCreatesOffsetsTopic: on a standalone broker, as on
// Kafka, the first FindCoordinator for a group creates __consumer_offsets,
// and Metadata then lists it among all topics and by name, marked internal
// (kgo's TestConsumeRegex waits for both); before, neither lists it.
func TestFindCoordinatorCreatesOffsetsTopic(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("orders", 2))
	c := dial(t, s.Addr())
	all := func() map[string]bool {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.Topics = nil // every topic
		resp := c.do(req).(*kmsg.MetadataResponse)
		out := map[string]bool{}
		for _, tp := range resp.Topics {
			require.Equal(t, errNone, tp.ErrorCode, *tp.Topic)
			out[*tp.Topic] = tp.IsInternal
		}
		return out
	}
	require.Equal(t, map[string]bool{"orders": false}, all())
	named := c.do(metadataFor(12, false, log.OffsetsTopic)).(*kmsg.MetadataResponse)
	require.Equal(t, errUnknownTopicOrPartition, named.Topics[0].ErrorCode)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"g"}
	resp := c.do(fc).(*kmsg.FindCoordinatorResponse)
	require.Len(t, resp.Coordinators, 1)
	require.Equal(t, errNone, resp.Coordinators[0].ErrorCode)

	require.Equal(t, map[string]bool{"orders": false, log.OffsetsTopic: true}, all())
	named = c.do(metadataFor(12, false, log.OffsetsTopic)).(*kmsg.MetadataResponse)
	require.Equal(t, errNone, named.Topics[0].ErrorCode)
	require.True(t, named.Topics[0].IsInternal)
	require.Len(t, named.Topics[0].Partitions, 1)
	require.Equal(t, []string{"orders"}, b.Topics(), "log.Broker's own Topics still leaves it out")

	// A second lookup finds it there: nothing created twice.
	resp = c.do(fc).(*kmsg.FindCoordinatorResponse)
	require.Equal(t, errNone, resp.Coordinators[0].ErrorCode)
	require.Equal(t, map[string]bool{"orders": false, log.OffsetsTopic: true}, all())
}

// TestMetadataListsTransactionState: once a transactional id is
// initialized (which creates __transaction_state on a standalone broker),
// Metadata for all topics lists __transaction_state, marked internal, as
// Kafka does; before, it does not.
func TestMetadataListsTransactionState(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("orders", 1))
	c := dial(t, s.Addr())
	all := func() map[string]bool {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.Topics = nil
		out := map[string]bool{}
		for _, tp := range c.do(req).(*kmsg.MetadataResponse).Topics {
			require.Equal(t, errNone, tp.ErrorCode, *tp.Topic)
			out[*tp.Topic] = tp.IsInternal
		}
		return out
	}
	require.Equal(t, map[string]bool{"orders": false}, all())
	ireq := kmsg.NewPtrInitProducerIDRequest()
	ireq.SetVersion(4)
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = kmsg.StringPtr("etl"), 60000
	require.Equal(t, errNone, c.do(ireq).(*kmsg.InitProducerIDResponse).ErrorCode)
	require.Equal(t, map[string]bool{"orders": false, log.TransactionStateTopic: true}, all())
}
