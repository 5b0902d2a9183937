package kafka

import (
	"context"
	"sync"
)

// Produces of one connection to one partition are appended in the order
// they were sent (see conn.laneFor): a produce waits until the one before
// it has its place in the partition's log. That place is known as soon as
// the batch is appended (or refused), long before an acks=all produce is
// answered, so a Backend tells the server with ProduceOrdered and the next
// produce goes ahead while the first waits for the ISR. A Backend that says
// nothing keeps the produces strictly one after the other, which is correct
// and slower.

type orderedKey struct{}

// orderHook is called once: the produce running with the context has its
// place in its partition's order. It then tells the hook it was derived
// from, if any.
type orderHook struct {
	once   sync.Once
	f      func()
	parent *orderHook
}

func (h *orderHook) fire() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		if h.f != nil {
			h.f()
		}
		h.parent.fire()
	})
}

// WithProduceOrdered returns a context whose ProduceOrdered calls f (once)
// and then the ProduceOrdered of ctx. A layer that orders produces itself
// (a member that forwards them to a partition's leader) uses it to learn
// when the layer below has fixed a produce's place.
func WithProduceOrdered(ctx context.Context, f func()) context.Context {
	parent, _ := ctx.Value(orderedKey{}).(*orderHook)
	return context.WithValue(ctx, orderedKey{}, &orderHook{f: f, parent: parent})
}

// ProduceOrdered tells the caller of Backend.Produce (through ctx) that
// the produce's batch has its place in the partition's order — appended
// or refused by the leader, or written, in order, on the way to it — so
// that the next produce to the partition from the same connection may
// start. Calling it more than once, or with a context that carries no
// hook, does nothing.
func ProduceOrdered(ctx context.Context) {
	h, _ := ctx.Value(orderedKey{}).(*orderHook)
	h.fire()
}
