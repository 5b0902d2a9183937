package replica

import (
	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/kafka"
)

// TxnBackend returns the member as its kafka.Server sees it for
// transactions, for the tests of which member coordinates what.
func TxnBackend(b *Broker) interface {
	kafka.TxnBackend
	kafka.TxnRouter
} {
	return kafkaBackend{b}
}

// SetTxnClock makes c the clock of b's transaction coordinators and of
// their expiry checks (transaction timeouts, transactional.id.expiration.ms),
// leaving the member's own (heartbeats, ISR) as it is: call it before b
// leads any partition of __transaction_state.
func SetTxnClock(b *Broker, c clock.Clock) {
	b.txns.expiryMu.Lock()
	defer b.txns.expiryMu.Unlock()
	b.txns.clock = c
}
