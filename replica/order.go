package replica

import (
	"context"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// An idempotent producer has up to 5 batches of a partition in flight, in
// concurrent ProduceBatch calls that may reach a member in any order. The
// leader appends a batch only if its sequence follows the last one (else
// OUT_OF_ORDER_SEQUENCE, which the producer retries later), so a member
// that forwards the calls must keep their order: produceOrder lets each
// attempt of a producer's batch to a partition go once every batch before
// it (by sequence) has its place — appended or refused by the leader, or
// written on the way there behind it (kafkaTransport's pipelined
// connections keep that order to the leader's log). A batch whose
// predecessor does not come within orderWait goes anyway: the producer
// dropped it (its timeout) or sent it elsewhere, and the leader decides.

// orderWait bounds how long a batch waits for the batches before it (a
// variable for the tests of the order itself, which a loaded machine's
// goroutine scheduling must not decide).
var orderWait = 50 * time.Millisecond

type orderKey struct {
	tp    log.TopicPartition
	pid   int64
	epoch int16
}

type orderLane struct {
	next    int32 // the sequence after the last batch given its place
	waiting map[*orderWaiter]struct{}
	active  int // attempts between enter and done
	used    time.Time
}

type orderWaiter struct {
	seq int32
	ch  chan struct{} // closed when next reaches seq
}

// produceOrder holds the lanes of a member, one per producer, epoch and
// partition that produced through it recently.
type produceOrder struct {
	clock clock.Clock // the member's (Config.Clock)
	mu    sync.Mutex
	lanes map[orderKey]*orderLane
}

// maxIdleLanes is how many lanes without an attempt in flight are kept
// before those idle for longer than laneIdle are dropped.
const (
	maxIdleLanes = 1024
	laneIdle     = time.Minute
)

// seqSpace is the space of Kafka's producer sequences: they wrap from
// MaxInt32 to 0.
const seqSpace = 1 << 31

// seqAdd is s+n in the sequence space.
func seqAdd(s, n int32) int32 { return int32((int64(s) + int64(n)) % seqSpace) }

// seqAfter reports whether a comes after b (by less than half the space).
func seqAfter(a, b int32) bool {
	d := (int64(a) - int64(b) + seqSpace) % seqSpace
	return d != 0 && d < seqSpace/2
}

// orderOf returns the lane key of an idempotent batch, its first
// sequence and how many it spans; ok false for any other batch.
func orderOf(tp log.TopicPartition, raw []byte) (k orderKey, seq, n int32, ok bool) {
	h, err := batch.ParseHeader(raw)
	if err != nil || h.ProducerID < 0 || h.BaseSequence < 0 || h.LastOffsetDelta < 0 {
		return orderKey{}, 0, 0, false
	}
	return orderKey{tp: tp, pid: h.ProducerID, epoch: h.ProducerEpoch}, h.BaseSequence, h.LastOffsetDelta + 1, true
}

// enter waits until the batches before seq in k's lane have their place
// (or orderWait passes, or ctx ends), then returns the context to make the
// attempt with — its order.Placed gives the batch its place — and
// done, to call when the attempt returns (which gives it its place if
// nothing did).
func (o *produceOrder) enter(ctx context.Context, k orderKey, seq, n int32) (context.Context, func()) {
	o.mu.Lock()
	if o.lanes == nil {
		o.lanes = map[orderKey]*orderLane{}
	}
	l := o.lanes[k]
	if l == nil {
		// The first batch seen goes: a producer that was writing through
		// another member (a failover, a restart) goes on from where it
		// is. A new epoch's first batches, racing, could come out of
		// order here (one retry); a log.Producer sends the first alone.
		o.pruneLocked()
		l = &orderLane{next: seq, waiting: map[*orderWaiter]struct{}{}}
		o.lanes[k] = l
	}
	l.active++
	if seqAfter(seq, l.next) {
		w := &orderWaiter{seq: seq, ch: make(chan struct{})}
		l.waiting[w] = struct{}{}
		o.mu.Unlock()
		t := o.clock.NewTimer(orderWait)
		select {
		case <-w.ch:
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
		o.mu.Lock()
		delete(l.waiting, w)
	}
	o.mu.Unlock()

	placed := sync.OnceFunc(func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if end := seqAdd(seq, n); seqAfter(end, l.next) {
			l.next = end
			for w := range l.waiting {
				if !seqAfter(w.seq, l.next) {
					delete(l.waiting, w)
					close(w.ch)
				}
			}
		}
	})
	actx := order.With(ctx, placed)
	return actx, func() {
		order.Placed(actx) // placed, if nothing did
		o.mu.Lock()
		l.active--
		l.used = o.clock.Now()
		o.mu.Unlock()
	}
}

// pruneLocked drops the lanes idle for long once there are many.
func (o *produceOrder) pruneLocked() {
	if len(o.lanes) < maxIdleLanes {
		return
	}
	now := o.clock.Now()
	for k, l := range o.lanes {
		if l.active == 0 && now.Sub(l.used) > laneIdle {
			delete(o.lanes, k)
		}
	}
}
