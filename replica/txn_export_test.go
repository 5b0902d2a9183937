package replica

import "github.com/strata-log/strata/kafka"

// TxnBackend returns the member as its kafka.Server sees it for
// transactions, for the tests of which member coordinates what.
func TxnBackend(b *Broker) interface {
	kafka.TxnBackend
	kafka.TxnRouter
} {
	return kafkaBackend{b}
}
