package replica

import (
	"context"
	"slices"
	"sync"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/replica/internal/machine"
)

// alterQueue holds the ISR proposals of the partitions this member leads,
// for the one goroutine that sends them to the controller (Kafka's
// AlterPartitionManager). The machines keep at most one in flight per
// partition.
type alterQueue struct {
	mu    sync.Mutex
	items []alterItem
	wake  chan struct{}
}

type alterItem struct {
	ps   *partState
	prop machine.ProposeISR
}

func newAlterQueue() *alterQueue { return &alterQueue{wake: make(chan struct{}, 1)} }

func (q *alterQueue) push(it alterItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *alterQueue) pop() (alterItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return alterItem{}, false
	}
	it := q.items[0]
	q.items = q.items[1:]
	return it, true
}

func (b *Broker) alterLoop() {
	defer b.wg.Done()
	for {
		it, ok := b.alters.pop()
		if !ok {
			select {
			case <-b.alters.wake:
				continue
			case <-b.ctx.Done():
				return
			}
		}
		if !b.stillPending(it) {
			continue
		}
		before := b.isrSizeForMetrics(it.ps)
		ctx, cancel := context.WithTimeout(b.ctx, 2*b.cfg.HeartbeatInterval)
		st, err := b.ctl.AlterPartition(ctx, controller.AlterPartitionRequest{
			BrokerID: b.cfg.ID, BrokerEpoch: b.brokerEpoch.Load(),
			Topic: it.ps.tp.Topic, Partition: it.ps.tp.Partition,
			LeaderEpoch: it.prop.LeaderEpoch, PartitionEpoch: it.prop.PartitionEpoch, ISR: it.prop.ISR,
		})
		cancel()
		if b.ctx.Err() != nil {
			return
		}
		ans, known := machine.AlterResultOf(it.prop, st, err)
		if !known {
			b.log.Debug("replica: alter partition: retrying", "partition", it.ps.tp, "err", err)
			if !b.sleep(fetchBackoff) {
				return
			}
			b.alters.push(it)
			continue
		}
		ps := it.ps
		ps.mu.Lock()
		if !ps.removed {
			b.runLeader(ps, ps.pm.Step(b.cfg.Clock.Now(), ans, nil))
			if m := b.cfg.Metrics; m != nil && ans.Result == machine.AlterAccepted && len(ans.ISR) != before {
				m.ISRChanged(ps.tp.Topic, ps.tp.Partition, len(ans.ISR), len(ans.ISR) < before)
			}
		}
		ps.mu.Unlock()
	}
}

// stillPending reports whether the proposal is still the one in flight.
func (b *Broker) stillPending(it alterItem) bool {
	ps := it.ps
	ps.mu.Lock()
	defer ps.mu.Unlock()
	isr, ok := ps.pm.Pending()
	return ok && !ps.removed && ps.pm.Leading() && slices.Equal(isr, it.prop.ISR) &&
		ps.pm.LeaderEpoch() == it.prop.LeaderEpoch && ps.pm.PartitionEpoch() == it.prop.PartitionEpoch
}
