package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Network is how a member listens on its RaftAddr and reaches its peers:
// the transport seam. TCPNetwork is the real one; a testnet.Node (or
// controllertest.Network, which wraps one) is loopback TCP whose links
// tests can cut.
type Network interface {
	Listen(addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// TCPNetwork is the Network of the operating system.
type TCPNetwork struct{}

func (TCPNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func (TCPNetwork) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Every connection to a member starts with one byte saying who it is for:
// Raft's NetworkTransport, or the controller's request forwarding. One
// address per member, one set of links for tests to cut.
const (
	streamRaft byte = 'R'
	streamRPC  byte = 'C'

	preambleTimeout = 5 * time.Second
)

// mux accepts connections on a member's address and routes them by their
// first byte. It owns every connection accepted or dialed through it and
// closes them all in close.
type mux struct {
	ln       net.Listener
	network  Network
	log      *slog.Logger
	serveRPC func(net.Conn) // serves one forwarding connection until it ends

	raftConns chan net.Conn
	done      chan struct{}
	wg        sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newMux(ln net.Listener, network Network, log *slog.Logger, serveRPC func(net.Conn)) *mux {
	m := &mux{
		ln: ln, network: network, log: log, serveRPC: serveRPC,
		raftConns: make(chan net.Conn),
		done:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("controller: accept failed", "err", err)
			select {
			case <-m.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !m.track(conn) {
			conn.Close()
			return
		}
		m.wg.Add(1)
		go m.route(conn)
	}
}

func (m *mux) route(conn net.Conn) {
	defer m.wg.Done()
	var kind [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(preambleTimeout))
	if _, err := conn.Read(kind[:]); err != nil {
		m.untrackClose(conn)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch kind[0] {
	case streamRaft:
		select {
		case m.raftConns <- &trackedConn{Conn: conn, m: m}:
		case <-m.done:
			m.untrackClose(conn)
		}
	case streamRPC:
		m.serveRPC(conn)
		m.untrackClose(conn)
	default:
		m.untrackClose(conn)
	}
}

// dial opens a connection of the given kind to addr.
func (m *mux) dial(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	conn, err := m.network.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !m.track(conn) {
		conn.Close()
		return nil, net.ErrClosed
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(d)
	}
	if _, err := conn.Write([]byte{kind}); err != nil {
		m.untrackClose(conn)
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return &trackedConn{Conn: conn, m: m}, nil
}

func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) untrackClose(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
	c.Close()
}

// close stops accepting, closes every connection and waits for the
// goroutines serving them.
func (m *mux) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.done)
	m.ln.Close()
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// trackedConn is a dialed connection that leaves the mux's set when closed.
type trackedConn struct {
	net.Conn
	m    *mux
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.m.untrackClose(c.Conn) })
	return nil
}

// streamLayer is the raft.StreamLayer over the mux.
type streamLayer struct {
	m      *mux
	addr   net.Addr
	closed chan struct{}
	once   sync.Once
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftConns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; the connections are closed with the mux.
func (s *streamLayer) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := s.m.dial(ctx, string(addr), streamRaft)
	if err != nil {
		return nil, &dialError{addr: string(addr), err: err}
	}
	return conn, nil
}

// dialError is a peer that could not be reached at all: no request went
// out, so sending it again later is safe.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return fmt.Sprintf("dial %s: %v", e.addr, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// advertised is a net.Addr for an address as configured.
type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }

// guardedTransport is Raft's NetworkTransport without pipelined
// replication, and with its heartbeat fast path fenced off at Close.
//
// Pipelining is off because hashicorp/raft's pipeline can wedge: after a
// follower answers an append with Success=false (as it does after every
// failover, until the leader finds where their logs agree), the replication
// goroutine may park on a send the pipeline's decoder never takes, so the
// follower gets no more entries and Raft's Shutdown waits for that goroutine
// forever (seen as a member's Close that never returned in the replica
// failover loop; grafana/pyroscope#5518 describes the same deadlock).
// Without it each append is a request and its answer, under the
// transport's timeout, and the entries still go in batches of up to
// MaxAppendEntries.
//
// The heartbeat fast path is fenced off at Close. The transport answers heartbeats on its connection
// goroutines by calling into Raft directly, outside Raft's own goroutines,
// so Raft's Shutdown does not wait for them; one under way when the store
// closes would make Raft panic ("failed to save current term"). seal
// waits for the heartbeats in progress and refuses later ones.
type guardedTransport struct {
	*raft.NetworkTransport
	mu     sync.RWMutex
	sealed bool

	raft   atomic.Pointer[raft.Raft] // set once Raft exists (see AppendEntries)
	peers  *peerHealth
	closed chan struct{} // closed by Close
	once   sync.Once
}

// redialEvery is how often an append to a peer that cannot be reached is
// tried again while it waits (AppendEntries).
const redialEvery = 50 * time.Millisecond

// AppendEntries sends an append (or a heartbeat) to a peer. When the peer
// cannot be reached at all (it is down), it does not fail at once: it
// dials again every redialEvery, for as long as this member leads in the
// request's term, and sends the request as soon as the peer listens.
//
// hashicorp/raft backs a failing follower off exponentially, up to 10 s
// between attempts (maxFailureScale), and logs an ERROR for every failed
// heartbeat: a member restarted after a minute down got no entries, so
// knew no topics created meanwhile, for up to 10 s after it was back
// (11 s seen), while its peers logged ERROR every 0.6 s. Waiting here
// keeps Raft's failure count at zero for a peer that is merely down, so it
// gets the log as soon as it listens again; its being down is logged once
// (peerHealth). Errors after the connection was made (a timeout, a reset)
// are returned as before.
func (g *guardedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	for {
		err := g.NetworkTransport.AppendEntries(id, target, args, resp)
		var de *dialError
		if !errors.As(err, &de) {
			if err == nil {
				g.peers.reached(string(id))
			}
			return err
		}
		g.peers.unreachable(string(id), err)
		t := time.NewTimer(redialEvery)
		select {
		case <-t.C:
		case <-g.closed:
			t.Stop()
			return err
		}
		if r := g.raft.Load(); r == nil || r.State() != raft.Leader || r.CurrentTerm() != args.Term {
			return err
		}
	}
}

// Close closes the transport and ends the appends waiting for a peer.
func (g *guardedTransport) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.NetworkTransport.Close()
}

func (g *guardedTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		g.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	g.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if g.sealed {
			rpc.Respond(nil, ErrClosed)
			return
		}
		cb(rpc)
	})
}

// AppendEntriesPipeline turns pipelined replication off (see above).
func (g *guardedTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// seal returns once no heartbeat is being handled; none is from then on.
func (g *guardedTransport) seal() {
	g.mu.Lock()
	g.sealed = true
	g.mu.Unlock()
}

// peerHealth logs peers that cannot be reached: once at WARN when one goes
// down, then at most once every repeatEvery while it stays down, and once
// at INFO when it is back.
type peerHealth struct {
	log         *slog.Logger
	repeatEvery time.Duration
	now         func() time.Time

	mu   sync.Mutex
	down map[string]*peerDown
}

type peerDown struct {
	since, logged time.Time
}

func newPeerHealth(log *slog.Logger, now func() time.Time) *peerHealth {
	return &peerHealth{log: log, repeatEvery: time.Minute, now: now, down: map[string]*peerDown{}}
}

func (h *peerHealth) unreachable(peer string, err error) {
	now := h.now()
	h.mu.Lock()
	d, ok := h.down[peer]
	if !ok {
		d = &peerDown{since: now}
		h.down[peer] = d
	}
	logIt := !ok || now.Sub(d.logged) >= h.repeatEvery
	if logIt {
		d.logged = now
	}
	h.mu.Unlock()
	if logIt {
		h.log.Warn("controller: peer unreachable", "peer", peer, "for", now.Sub(d.since).Round(time.Second), "err", err)
	}
}

func (h *peerHealth) reached(peer string) {
	h.mu.Lock()
	d, ok := h.down[peer]
	delete(h.down, peer)
	h.mu.Unlock()
	if ok {
		h.log.Info("controller: peer reachable again", "peer", peer, "after", h.now().Sub(d.since).Round(time.Millisecond))
	}
}
