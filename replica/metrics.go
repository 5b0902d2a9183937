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

// isrSizeForMetrics is the size of ps's committed ISR, read before its
// leader asks the controller to change it: the metadata may bring the
// change before the answer does, so it is read before the call (0 without
// Config.Metrics).
func (b *Broker) isrSizeForMetrics(ps *partState) int {
	if b.cfg.Metrics == nil {
		return 0
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.pm.ISR())
}
