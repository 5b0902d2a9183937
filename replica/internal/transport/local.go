package transport

import (
	"context"
	"fmt"
	"sync"

	"github.com/strata-log/strata/log"
)

// LocalNetwork connects the members of one process (tests, examples,
// the unit-test fixture): each member's Transport calls the others
// directly, through links a test can cut and heal. A cut link fails new
// calls at once with ErrUnreachable and ends the calls in flight on it.
// Record batches cross it as handles on the leader's segment files, as
// sendfile would send them.
type LocalNetwork struct {
	mu      sync.Mutex
	members map[int]Member
	cut     map[[2]int]bool
	calls   map[*localCall]struct{}
}

type localCall struct {
	from, to int
	cancel   context.CancelFunc
}

// NewLocalNetwork returns an empty network.
func NewLocalNetwork() *LocalNetwork {
	return &LocalNetwork{members: map[int]Member{}, cut: map[[2]int]bool{}, calls: map[*localCall]struct{}{}}
}

func link(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// Cut cuts the link between members a and b, both ways.
func (n *LocalNetwork) Cut(a, b int) {
	if a == b {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link(a, b)] = true
	for c := range n.calls {
		if link(c.from, c.to) == link(a, b) {
			c.cancel()
		}
	}
}

// Heal restores the link between a and b.
func (n *LocalNetwork) Heal(a, b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, link(a, b))
}

// Isolate cuts every link of member a to the members joined now.
func (n *LocalNetwork) Isolate(a int) {
	n.mu.Lock()
	var others []int
	for id := range n.members {
		if id != a {
			others = append(others, id)
		}
	}
	n.mu.Unlock()
	for _, b := range others {
		n.Cut(a, b)
	}
}

// HealAll restores every link.
func (n *LocalNetwork) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// Member is a member as the network calls it: what a member serves to
// the others (package replica's Broker, through an adapter).
type Member interface {
	ID() int
	// Ready reports whether the member serves calls; until it does, calls
	// to it fail with ErrUnreachable.
	Ready() bool
	ServeReplicaFetch(ctx context.Context, req ReplicaFetchRequest) (ReplicaFetchResponse, error)
	ServeEpochEnd(req EpochEndRequest) EpochEndAnswer
	Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error)
	Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error)
	ListOffset(tp log.TopicPartition, at int64) (int64, error)
	DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error)
	Group(call func(log.GroupClient) error) error
}

// Join puts m on the network; false when a member with its ID is on it
// already.
func (n *LocalNetwork) Join(m Member) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.members[m.ID()]; ok {
		return false
	}
	n.members[m.ID()] = m
	return true
}

// Leave takes m off the network and ends the calls to it.
func (n *LocalNetwork) Leave(m Member) {
	id := m.ID()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.members[id] == m {
		delete(n.members, id)
	}
	for c := range n.calls {
		if c.to == id || c.from == id {
			c.cancel()
		}
	}
}

// call runs fn on member to for member from, unless their link is cut.
// ok false: the link was cut (or the member left) during the call, and
// its result must be dropped.
func (n *LocalNetwork) call(ctx context.Context, from, to int, fn func(context.Context, Member) error) (err error, ok bool) {
	n.mu.Lock()
	m := n.members[to]
	if m == nil || n.cut[link(from, to)] || n.members[from] == nil || !m.Ready() {
		n.mu.Unlock()
		return fmt.Errorf("%w: %d → %d", ErrUnreachable, from, to), false
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &localCall{from: from, to: to, cancel: cancel}
	n.calls[c] = struct{}{}
	n.mu.Unlock()

	err = fn(cctx, m)

	n.mu.Lock()
	delete(n.calls, c)
	broken := n.cut[link(from, to)] || n.members[to] != m || cctx.Err() != nil && ctx.Err() == nil
	n.mu.Unlock()
	cancel()
	if broken {
		return fmt.Errorf("%w: %d → %d (cut during the call)", ErrUnreachable, from, to), false
	}
	return err, true
}

// Endpoint returns the Transport of member id on this network.
func (n *LocalNetwork) Endpoint(id int) Transport { return localEndpoint{n: n, id: id} }

type localEndpoint struct {
	n  *LocalNetwork
	id int
}

func (e localEndpoint) ReplicaFetch(ctx context.Context, leader int, req ReplicaFetchRequest) (ReplicaFetchResponse, error) {
	var resp ReplicaFetchResponse
	err, ok := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) (err error) {
		resp, err = m.ServeReplicaFetch(ctx, req)
		return err
	})
	if !ok {
		resp.Release()
		return ReplicaFetchResponse{}, err
	}
	return resp, err
}

func (e localEndpoint) EpochEnd(ctx context.Context, leader int, req EpochEndRequest) (EpochEndAnswer, error) {
	var ans EpochEndAnswer
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) error {
		ans = m.ServeEpochEnd(req)
		return nil
	})
	return ans, err
}

func (e localEndpoint) Produce(ctx context.Context, leader int, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	var res log.ProduceResult
	// The leader may modify the batch (its base offset): give it its own.
	batch = append([]byte(nil), batch...)
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) (err error) {
		res, err = m.Produce(ctx, tp, batch, acks)
		return err
	})
	return res, err
}

func (e localEndpoint) Fetch(ctx context.Context, leader int, req log.FetchRequest) (log.FetchResponse, error) {
	var resp log.FetchResponse
	err, ok := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) (err error) {
		resp, err = m.Fetch(ctx, req)
		return err
	})
	if !ok {
		resp.Release()
		return log.FetchResponse{}, err
	}
	return resp, err
}

func (e localEndpoint) ListOffset(ctx context.Context, leader int, tp log.TopicPartition, at int64) (int64, error) {
	var off int64
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) (err error) {
		off, err = m.ListOffset(tp, at)
		return err
	})
	return off, err
}

func (e localEndpoint) DeleteRecords(ctx context.Context, leader int, tp log.TopicPartition, offset int64) (int64, error) {
	var low int64
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, m Member) (err error) {
		low, err = m.DeleteRecords(ctx, tp, offset)
		return err
	})
	return low, err
}

func (e localEndpoint) Group(ctx context.Context, coordinator int, call func(log.GroupClient) error) error {
	err, _ := e.n.call(ctx, e.id, coordinator, func(_ context.Context, m Member) error {
		return m.Group(call)
	})
	return err
}
