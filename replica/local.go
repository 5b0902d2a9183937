package replica

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
	members map[int]*Broker
	cut     map[[2]int]bool
	calls   map[*localCall]struct{}
}

type localCall struct {
	from, to int
	cancel   context.CancelFunc
}

// NewLocalNetwork returns an empty network.
func NewLocalNetwork() *LocalNetwork {
	return &LocalNetwork{members: map[int]*Broker{}, cut: map[[2]int]bool{}, calls: map[*localCall]struct{}{}}
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

func (n *LocalNetwork) join(b *Broker) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.members[b.cfg.ID]; ok {
		return fmt.Errorf("%w: member %d is already on the local network", ErrInvalidConfig, b.cfg.ID)
	}
	n.members[b.cfg.ID] = b
	return nil
}

// leave takes b off the network and ends the calls to it.
func (n *LocalNetwork) leave(b *Broker) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.members[b.cfg.ID] == b {
		delete(n.members, b.cfg.ID)
	}
	for c := range n.calls {
		if c.to == b.cfg.ID || c.from == b.cfg.ID {
			c.cancel()
		}
	}
}

// call runs fn on member to for member from, unless their link is cut.
// ok false: the link was cut (or the member left) during the call, and
// its result must be dropped.
func (n *LocalNetwork) call(ctx context.Context, from, to int, fn func(context.Context, *Broker) error) (err error, ok bool) {
	n.mu.Lock()
	m := n.members[to]
	if m == nil || n.cut[link(from, to)] || n.members[from] == nil || !m.isReady() {
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
	err, ok := e.n.call(ctx, e.id, leader, func(ctx context.Context, b *Broker) (err error) {
		resp, err = b.serveReplicaFetch(ctx, req)
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
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, b *Broker) error {
		ans = b.serveEpochEnd(req)
		return nil
	})
	return ans, err
}

func (e localEndpoint) Produce(ctx context.Context, leader int, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	var res log.ProduceResult
	// The leader may modify the batch (its base offset): give it its own.
	batch = append([]byte(nil), batch...)
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, b *Broker) (err error) {
		res, err = b.produceLocal(ctx, tp, batch, acks)
		return err
	})
	return res, err
}

func (e localEndpoint) Fetch(ctx context.Context, leader int, req log.FetchRequest) (log.FetchResponse, error) {
	var resp log.FetchResponse
	err, ok := e.n.call(ctx, e.id, leader, func(ctx context.Context, b *Broker) (err error) {
		resp, err = b.fetchLocal(ctx, req)
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
	err, _ := e.n.call(ctx, e.id, leader, func(ctx context.Context, b *Broker) (err error) {
		off, err = b.listOffsetLocal(tp, at)
		return err
	})
	return off, err
}

func (e localEndpoint) Group(ctx context.Context, coordinator int, call func(log.GroupClient) error) error {
	err, _ := e.n.call(ctx, e.id, coordinator, func(_ context.Context, b *Broker) error {
		return b.groupLocal(call)
	})
	return err
}
