package testnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// ErrLinkCut is returned by Dial across a link that is down.
var ErrLinkCut = errors.New("testnet: link cut")

// preambleTimeout bounds how long an accepted connection may take to name
// its node.
const preambleTimeout = 5 * time.Second

// Network is a switchboard of loopback TCP connections between named
// nodes. Its methods are safe for concurrent use. Close it when done: it
// owns the reserved ports and a goroutine for each.
type Network struct {
	mu       sync.Mutex
	ports    map[string]*port // by address
	cut      map[link]bool
	isolated map[string]bool
	conns    map[link]map[*net.TCPConn]struct{}
	pruneAt  map[link]int // prune a link's closed conns when it has this many
	closed   bool
	wg       sync.WaitGroup
	dialer   net.Dialer
}

// link is an unordered pair of node names.
type link struct{ a, b string }

func linkOf(x, y string) link {
	if x > y {
		x, y = y, x
	}
	return link{x, y}
}

// port is one reserved address: a real listening socket, and the node's
// listener while the node listens on it.
type port struct {
	addr     string
	node     string
	ln       net.Listener
	listener *listener
}

// New returns a Network with no nodes.
func New() *Network {
	return &Network{
		ports:    make(map[string]*port),
		cut:      make(map[link]bool),
		isolated: make(map[string]bool),
		conns:    make(map[link]map[*net.TCPConn]struct{}),
		pruneAt:  make(map[link]int),
	}
}

// Node returns the network as the node named name sees it. Any non-empty
// name will do; nodes need no registration.
func (n *Network) Node(name string) *Node {
	if name == "" {
		panic("testnet: empty node name")
	}
	return &Node{n: n, name: name}
}

// Linked reports whether a and b can reach each other now.
func (n *Network) Linked(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkedLocked(a, b)
}

func (n *Network) linkedLocked(a, b string) bool {
	return a == b || !n.cut[linkOf(a, b)] && !n.isolated[a] && !n.isolated[b]
}

// Cut takes the link between a and b down, both ways, closing its
// connections.
func (n *Network) Cut(a, b string) {
	if a == b {
		return
	}
	n.mu.Lock()
	n.cut[linkOf(a, b)] = true
	open := n.dropLocked()
	n.mu.Unlock()
	closeAll(open)
}

// Heal brings the link between a and b back up, unless one of them is
// isolated.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, linkOf(a, b))
}

// Isolate takes down every link of a to another node, also to nodes that
// first appear later, until Rejoin(a) or HealAll.
func (n *Network) Isolate(a string) {
	n.mu.Lock()
	n.isolated[a] = true
	open := n.dropLocked()
	n.mu.Unlock()
	closeAll(open)
}

// Rejoin ends the isolation of a; links cut one by one stay cut.
func (n *Network) Rejoin(a string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.isolated, a)
}

// Partition cuts every link between two nodes of different sides. Links
// within a side, and of nodes on no side, are left as they are.
func (n *Network) Partition(sides ...[]string) {
	n.mu.Lock()
	for i, side := range sides {
		for _, other := range sides[i+1:] {
			for _, a := range side {
				for _, b := range other {
					if a != b {
						n.cut[linkOf(a, b)] = true
					}
				}
			}
		}
	}
	open := n.dropLocked()
	n.mu.Unlock()
	closeAll(open)
}

// HealAll brings every link up and ends every isolation.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.isolated)
}

// dropLocked forgets the connections of every link that is down and
// returns them, for the caller to close once it has let go of the lock.
func (n *Network) dropLocked() []*net.TCPConn {
	var open []*net.TCPConn
	for l, cs := range n.conns {
		if n.linkedLocked(l.a, l.b) {
			continue
		}
		for c := range cs {
			open = append(open, c)
		}
		delete(n.conns, l)
		delete(n.pruneAt, l)
	}
	return open
}

func closeAll(conns []*net.TCPConn) {
	for _, c := range conns {
		c.Close()
	}
}

// Close closes every reserved port, listener and connection, and waits for
// the Network's goroutines. Dial and Listen fail with net.ErrClosed after.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, p := range n.ports {
		p.ln.Close()
		if p.listener != nil {
			p.listener.shut()
		}
	}
	var open []*net.TCPConn
	for _, cs := range n.conns {
		for c := range cs {
			open = append(open, c)
		}
	}
	clear(n.conns)
	n.mu.Unlock()
	closeAll(open)
	n.wg.Wait()
	return nil
}

// trackLocked puts c on the books of l. Connections are the caller's to
// close; the books let go of closed ones from time to time.
func (n *Network) trackLocked(l link, c *net.TCPConn) {
	cs := n.conns[l]
	if cs == nil {
		cs = make(map[*net.TCPConn]struct{})
		n.conns[l] = cs
	}
	if len(cs) >= max(n.pruneAt[l], 16) {
		for x := range cs {
			if isClosed(x) {
				delete(cs, x)
			}
		}
		n.pruneAt[l] = 2 * len(cs)
	}
	cs[c] = struct{}{}
}

// isClosed reports whether c has been closed (by its owner).
func isClosed(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	return rc.Control(func(uintptr) {}) != nil
}

func (n *Network) accept(p *port) {
	defer n.wg.Done()
	for {
		raw, err := p.ln.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go n.admit(p, raw.(*net.TCPConn))
	}
}

// admit reads the preamble naming the dialing node and hands the
// connection to the node listening on p, unless the link is down or
// nobody listens.
func (n *Network) admit(p *port, raw *net.TCPConn) {
	defer n.wg.Done()
	_ = raw.SetReadDeadline(time.Now().Add(preambleTimeout))
	from, err := readPreamble(raw)
	_ = raw.SetReadDeadline(time.Time{})
	if err != nil {
		raw.Close()
		return
	}
	n.mu.Lock()
	l := p.listener
	if n.closed || l == nil || !n.linkedLocked(from, p.node) {
		n.mu.Unlock()
		raw.Close()
		return
	}
	n.trackLocked(linkOf(from, p.node), raw)
	n.mu.Unlock()
	select {
	case l.ch <- raw:
	case <-l.done:
		raw.Close()
	}
}

func writePreamble(w io.Writer, node string) error {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(node)))
	_, err := w.Write(append(b, node...))
	return err
}

func readPreamble(r io.Reader) (string, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// Node is the Network as one node sees it.
type Node struct {
	n    *Network
	name string
}

// Name returns the node's name.
func (d *Node) Name() string { return d.name }

// Reserve opens a listening socket on a free 127.0.0.1 port for this node
// and returns its address. The port stays the node's until the Network is
// closed, so no other test takes it and the node can restart on it.
func (d *Node) Reserve() (string, error) {
	n := d.n
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		ln.Close()
		return "", net.ErrClosed
	}
	p := &port{addr: ln.Addr().String(), node: d.name, ln: ln}
	n.ports[p.addr] = p
	n.wg.Add(1)
	go n.accept(p)
	return p.addr, nil
}

// Listen returns the node's listener on addr, one of its reserved
// addresses. One listener per address at a time; closing it leaves the
// address reserved.
func (d *Node) Listen(addr string) (net.Listener, error) {
	n := d.n
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.ports[addr]
	switch {
	case n.closed:
		return nil, net.ErrClosed
	case !ok || p.node != d.name:
		return nil, fmt.Errorf("testnet: %s is not an address reserved by node %s", addr, d.name)
	case p.listener != nil:
		return nil, fmt.Errorf("testnet: %s already has a listener", addr)
	}
	p.listener = &listener{n: n, p: p, ch: make(chan *net.TCPConn), done: make(chan struct{})}
	return p.listener, nil
}

// Dial connects this node to addr, a reserved address of the Network. It
// fails with ErrLinkCut if the link is down, and as a refused connection
// (syscall.ECONNREFUSED) if addr is not reserved or nobody listens on it.
func (d *Node) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := d.n
	n.mu.Lock()
	p, ok := n.ports[addr]
	var err error
	switch {
	case n.closed:
		err = net.ErrClosed
	case !ok:
		err = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case !n.linkedLocked(d.name, p.node):
		err = fmt.Errorf("%w: %s - %s", ErrLinkCut, d.name, p.node)
	case p.listener == nil:
		err = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c, err := n.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	raw := c.(*net.TCPConn)
	if err := writePreamble(raw, d.name); err != nil {
		raw.Close()
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || !n.linkedLocked(d.name, p.node) {
		raw.Close()
		return nil, fmt.Errorf("%w: %s - %s", ErrLinkCut, d.name, p.node)
	}
	n.trackLocked(linkOf(d.name, p.node), raw)
	return raw, nil
}

// DialContext is Dial for hooks shaped like net.Dialer.DialContext;
// network must be "tcp", "tcp4" or "tcp6".
func (d *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return d.Dial(ctx, addr)
	}
	return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
}

// listener is a node's view of one of its reserved ports.
type listener struct {
	n    *Network
	p    *port
	ch   chan *net.TCPConn
	done chan struct{}
	once sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close detaches the node from the port; the port stays reserved.
func (l *listener) Close() error {
	l.n.mu.Lock()
	if l.p.listener == l {
		l.p.listener = nil
	}
	l.n.mu.Unlock()
	l.shut()
	return nil
}

func (l *listener) shut() { l.once.Do(func() { close(l.done) }) }

func (l *listener) Addr() net.Addr { return l.p.ln.Addr() }
