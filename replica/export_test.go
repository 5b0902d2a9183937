package replica

import "github.com/strata-log/strata/kafka"

// KafkaBackend returns the member as its kafka.Server on Addr sees it, for
// the tests of what the server is given (brokers, leaders and ISRs, group
// coordinators).
func KafkaBackend(b *Broker) interface {
	kafka.ClusterBackend
	kafka.GroupRouter
} {
	return kafkaBackend{b}
}

// ThrottleBackend returns the member's replication throttles as its
// kafka.Server alters them.
func ThrottleBackend(b *Broker) kafka.ThrottleConfigBackend { return kafkaBackend{b} }
