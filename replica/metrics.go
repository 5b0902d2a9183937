package replica

import "sync"

// The purgatory sizes a member tells Config.Metrics: the fetches parked in
// its purgatory (consumers' and followers') and the acks=all produces
// waiting for the ISR (Kafka's DelayedProduce). Each parked operation
// reports once parked and once it leaves, under mu, so that the size told
// last is the size after the last change.
type purgatorySizes struct {
	mu       sync.Mutex
	produces int
}

func (b *Broker) reportFetchPurgatory() {
	b.purg.mu.Lock()
	b.cfg.Metrics.Purgatory("Fetch", b.purgatory.Pending())
	b.purg.mu.Unlock()
}

func (b *Broker) delayedProduce(delta int) {
	b.purg.mu.Lock()
	b.purg.produces += delta
	b.cfg.Metrics.Purgatory("Produce", b.purg.produces)
	b.purg.mu.Unlock()
}
