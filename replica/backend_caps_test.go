package replica

import (
	"testing"

	"github.com/strata-log/strata/kafka"
)

// The member's servers are handed an adapter, not the Broker: it must have
// every optional capability the server probes that the member serves (and
// no other), or an API would silently stop being served and advertised.
func TestKafkaBackendCapabilities(t *testing.T) {
	var inter any = kafkaBackend{}
	var client any = &listenerBackend{}
	for _, b := range []any{inter, client} {
		_, replica := b.(kafka.ReplicaBackend)
		_, batches := b.(kafka.ReplicaBatchesBackend)
		_, cluster := b.(kafka.ClusterBackend)
		_, groups := b.(kafka.GroupRouter)
		_, pids := b.(kafka.ProducerIDBackend)
		_, parts := b.(kafka.PartitionCreator)
		_, borrower := b.(kafka.BatchBorrower)
		_, unregister := b.(kafka.BrokerUnregisterer)
		_, quorum := b.(kafka.QuorumBackend)
		_, elector := b.(kafka.LeaderElector)
		if !replica || !batches || !cluster || !groups || !pids || !parts || !borrower || !unregister || !quorum || !elector {
			t.Errorf("%T: replica %v, replica batches %v, cluster %v, group router %v, producer ids %v, partition creator %v, batch borrower %v, broker unregisterer %v, quorum %v, leader elector %v; want all",
				b, replica, batches, cluster, groups, pids, parts, borrower, unregister, quorum, elector)
		}
		_, configs := b.(kafka.TopicConfigAlterer)
		_, records := b.(kafka.RecordsDeleter)
		_, throttles := b.(kafka.ThrottleConfigBackend)
		if !configs || !records || !throttles {
			t.Errorf("%T: config alterer %v, records deleter %v, throttle configs %v; want all (admin_configs.go, throttle_config.go)", b, configs, records, throttles)
		}
		// A member answers OffsetForLeaderEpoch whole (ReplicaBackend).
		if _, epochs := b.(kafka.EpochEndOffsetter); epochs {
			t.Errorf("%T: an epoch end offsetter; a member answers OffsetForLeaderEpoch as a ReplicaBackend", b)
		}
	}
	if _, ok := inter.(kafka.ListenerBackend); ok {
		t.Error("the inter-broker backend is a kafka.ListenerBackend; only a client listener's is")
	}
	if _, ok := client.(kafka.ListenerBackend); !ok {
		t.Error("a client listener's backend is no kafka.ListenerBackend")
	}
	var asBroker any = (*Broker)(nil)
	if _, ok := asBroker.(kafka.Backend); ok {
		t.Error("*Broker is a kafka.Backend again: the server's methods belong on the adapter")
	}
}
