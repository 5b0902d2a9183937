package log

import (
	"time"
)

// The pushed metrics of package log (Config.Metrics, StoreConfig.Metrics):
// where a figure is pushed the code asks whether a Hooks is set, one
// predictable branch, and calls these helpers only if it is.

// timedFlush is flush, timed and told to the metrics hooks: Kafka's
// LogFlushStats, one observation per flush of the log.
func (p *Partition) timedFlush() error {
	if p.metrics == nil {
		return p.flush()
	}
	start := p.clock.Now()
	err := p.flush()
	p.metrics.Fsync(p.clock.Now().Sub(start))
	return err
}

// reportFetchPurgatory tells the metrics hooks how many fetches wait in
// the purgatory. A parked fetch calls it once parked and once it has left,
// under purgMu, so that the size told last is the size after the last
// change.
func (b *Broker) reportFetchPurgatory() {
	b.purgMu.Lock()
	b.cfg.Metrics.Purgatory("Fetch", b.fetches.Pending())
	b.purgMu.Unlock()
}

// cleanerPass is what a cleaner pass's metrics need from before it ran.
type cleanerPass struct {
	p     *Partition
	start time.Time
	sizes []segSize // the sealed segments before the pass
}

type segSize struct{ base, size int64 }

// sealedSizes returns the base offset and size of each of p's sealed
// segments.
func sealedSizes(p *Partition) []segSize {
	segs := *p.segs.Load()
	out := make([]segSize, 0, max(len(segs)-1, 0))
	for _, s := range segs[:max(len(segs)-1, 0)] {
		out = append(out, segSize{s.BaseOffset(), s.Size()})
	}
	return out
}

func (c *cleaner) startPass(p *Partition) cleanerPass {
	return cleanerPass{p: p, start: c.b.cfg.Clock.Now(), sizes: sealedSizes(p)}
}

// endPass tells the metrics hooks of a pass that cleaned pass.p below
// next: the bytes of the segments below next before it (what it read) and
// after it (what it wrote).
func (c *cleaner) endPass(pass cleanerPass, next int64) {
	below := func(ss []segSize) (n int64) {
		for _, s := range ss {
			if s.base < next {
				n += s.size
			}
		}
		return n
	}
	read, written := below(pass.sizes), below(sealedSizes(pass.p))
	c.b.cfg.Metrics.Cleaned(pass.p.topic, pass.p.id, read, written, c.b.cfg.Clock.Now().Sub(pass.start))
}
