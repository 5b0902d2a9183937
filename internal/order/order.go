// Package order carries, in a produce's context, the hook by which a
// backend tells the Kafka server that the produce has its place in its
// partition's order (Placed), so that the next produce of the same
// connection to that partition may start.
//
// Produces of one connection to one partition are appended in the order
// they were sent (kafka's conn.laneFor): a produce waits until the one
// before it has its place in the partition's log. That place is known as
// soon as the batch is appended (or refused), long before an acks=all
// produce is answered, so a backend says so with Placed and the next
// produce goes ahead while the first waits for the ISR. A backend that says
// nothing keeps the produces strictly one after the other, which is correct
// and slower.
//
// Only package kafka (the server) and package replica (a member, which
// orders the produces it forwards) use it: it is internal so that it is no
// part of kafka's API.
package order

import (
	"context"
	"sync"
)

type key struct{}

// hook is called once: the produce running with the context has its place
// in its partition's order. It then tells the hook it was derived from, if
// any.
type hook struct {
	once   sync.Once
	f      func()
	parent *hook
}

func (h *hook) fire() {
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

// With returns a context whose Placed calls f (once) and then the Placed of
// ctx. A layer that orders produces itself (a member that forwards them to
// a partition's leader) uses it to learn when the layer below has fixed a
// produce's place.
func With(ctx context.Context, f func()) context.Context {
	parent, _ := ctx.Value(key{}).(*hook)
	return context.WithValue(ctx, key{}, &hook{f: f, parent: parent})
}

// Detached returns ctx without its hook: Placed on it, or on a context
// derived from it by With, does not reach ctx's.
func Detached(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, (*hook)(nil))
}

// Placed tells the caller of a backend's Produce (through ctx) that the
// produce's batch has its place in the partition's order — appended or
// refused by the leader, or written, in order, on the way to it — so that
// the next produce to the partition from the same connection may start.
// Calling it more than once, or with a context that carries no hook, does
// nothing.
func Placed(ctx context.Context) {
	h, _ := ctx.Value(key{}).(*hook)
	h.fire()
}
