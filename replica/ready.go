package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
)

// A member serves only what it knows (KRaft's broker startup): it is
// ready once it is registered, has applied the metadata up to the version
// its registration committed at — everything the cluster did before — and
// the controller has unfenced it. Until then its Kafka listeners accept
// no connection (a client's connection waits in the backlog, and its
// requests are answered once the member is ready), the LocalNetwork
// answers calls to it with ErrUnreachable, and calls made on it as a
// log.Client wait, within their context. A member restarted after a crash
// so never answers with the topics of a stale snapshot, or "unknown topic"
// for a topic created while it was down.

// ErrNotCaughtUp is returned by Start when the member could not register
// and catch up with the metadata within Config.StartTimeout although a
// quorum of the controller's voters was reachable.
var ErrNotCaughtUp = errors.New("replica: not caught up with the cluster metadata")

// DefaultStartTimeout is how long Start waits for the member to be ready
// by default (Kafka's initial.broker.registration.timeout.ms).
const DefaultStartTimeout = 60 * time.Second

// markReady makes the member ready, once.
func (b *Broker) markReady() {
	b.readyOnce.Do(func() {
		close(b.ready)
		b.log.Info("replica: registered and caught up", "version", b.img.Load().Version())
	})
}

// Ready returns a channel closed once the member is ready: registered,
// caught up with the metadata and unfenced. Start returns with it closed
// unless no quorum of voters was reachable when it was called.
func (b *Broker) Ready() <-chan struct{} { return b.ready }

func (b *Broker) isReady() bool {
	select {
	case <-b.ready:
		return true
	default:
		return false
	}
}

// awaitReady waits, in Start, until the member is ready. When a majority
// of the voters cannot be reached at all (the first members of a cluster
// that is forming, started one by one) it returns at once: the member
// becomes ready in the background once a quorum forms, and serves only
// then.
func (b *Broker) awaitReady() error {
	if !b.quorumReachable() {
		b.log.Info("replica: no quorum of voters reachable yet; serving once registered and caught up")
		return nil
	}
	t := time.NewTimer(b.cfg.StartTimeout)
	defer t.Stop()
	select {
	case <-b.ready:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: member %d not registered, caught up and unfenced within %v", ErrNotCaughtUp, b.cfg.ID, b.cfg.StartTimeout)
	}
}

// quorumReachable reports whether a majority of the voters, this member
// included when it is one, accept a connection on their RaftAddr now.
func (b *Broker) quorumReachable() bool {
	var nw controller.Network = controller.TCPNetwork{}
	if b.cfg.Network != nil {
		nw = b.cfg.Network
	}
	var (
		mu sync.Mutex
		up = 0
		wg sync.WaitGroup
	)
	voters := 0
	if b.ctl.Voter() {
		up, voters = 1, 1 // this member
	}
	for _, p := range b.cfg.Peers {
		if p.ID == b.cfg.ID {
			continue
		}
		voters++
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(b.ctx, time.Second)
			defer cancel()
			conn, err := nw.Dial(ctx, p.RaftAddr)
			if err != nil {
				return
			}
			conn.Close()
			mu.Lock()
			up++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return 2*up > voters
}

// waitReady waits until the member is ready, ctx ends (its error) or the
// member closes (log.ErrClosed).
func (b *Broker) waitReady(ctx context.Context) error {
	select {
	case <-b.ready:
		return nil
	default:
	}
	select {
	case <-b.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w: member %d", ctx.Err(), ErrNotCaughtUp, b.cfg.ID)
	case <-b.ctx.Done():
		return log.ErrClosed
	}
}

// gatedListener accepts connections only once open is closed: a member's
// Kafka listeners are bound at Start (the address is registered), and
// serve once the member is ready.
type gatedListener struct {
	net.Listener
	open <-chan struct{}
	done chan struct{}
	once sync.Once
}

func gate(ln net.Listener, open <-chan struct{}) *gatedListener {
	return &gatedListener{Listener: ln, open: open, done: make(chan struct{})}
}

func (g *gatedListener) Accept() (net.Conn, error) {
	select {
	case <-g.open:
	case <-g.done:
		return nil, net.ErrClosed
	}
	return g.Listener.Accept()
}

func (g *gatedListener) Close() error {
	g.once.Do(func() { close(g.done) })
	return g.Listener.Close()
}

// listen binds a Kafka listener of the member on addr, through the
// Network when viaNetwork, gated until the member is ready.
func (b *Broker) listen(addr string, viaNetwork bool) (net.Listener, error) {
	var ln net.Listener
	var err error
	if viaNetwork {
		ln, err = b.cfg.Network.Listen(addr)
	} else {
		// As kafka.Listen does: no MPTCP, which sendfile need not pay for.
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		ln, err = lc.Listen(context.Background(), "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return gate(ln, b.ready), nil
}
