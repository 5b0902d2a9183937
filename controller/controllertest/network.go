package controllertest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrLinkCut is returned by Dial across a cut link.
var ErrLinkCut = errors.New("controllertest: link cut")

// Network is a switchboard of real loopback TCP connections whose links a
// test can cut and heal. Each member address is reserved once (a listening
// socket kept open until Close, so no other test can take the port, and a
// member can restart on it); every connection made through the Network
// names the address it comes from, so a cut applies to both directions and
// closes the connections already open on that link.
type Network struct {
	mu      sync.Mutex
	ports   map[string]*port
	cut     map[link]bool
	conns   map[link]map[*conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	dialer  net.Dialer
	timeout time.Duration
}

type link struct{ a, b string }

func linkOf(x, y string) link {
	if x > y {
		x, y = y, x
	}
	return link{x, y}
}

// port is one reserved address: a real listener, and the member's virtual
// listener while the member listens.
type port struct {
	addr   string
	ln     net.Listener
	member *listener
}

// NewNetwork returns an empty Network.
func NewNetwork() *Network {
	return &Network{
		ports:   make(map[string]*port),
		cut:     make(map[link]bool),
		conns:   make(map[link]map[*conn]struct{}),
		timeout: 5 * time.Second,
	}
}

// Reserve opens a listening socket on a free 127.0.0.1 port and returns its
// address, for one member.
func (n *Network) Reserve() (string, error) {
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
	p := &port{addr: ln.Addr().String(), ln: ln}
	n.ports[p.addr] = p
	n.wg.Add(1)
	go n.accept(p)
	return p.addr, nil
}

// Endpoint returns the controller.Network for the member at addr.
func (n *Network) Endpoint(addr string) *Endpoint { return &Endpoint{n: n, addr: addr} }

// Cut cuts the link between a and b, both ways, closing its connections.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	l := linkOf(a, b)
	n.cut[l] = true
	open := n.conns[l]
	delete(n.conns, l)
	n.mu.Unlock()
	for c := range open {
		c.Conn.Close()
	}
}

// Isolate cuts every link of a to the other reserved addresses.
func (n *Network) Isolate(a string) {
	n.mu.Lock()
	var others []string
	for addr := range n.ports {
		if addr != a {
			others = append(others, addr)
		}
	}
	n.mu.Unlock()
	for _, b := range others {
		n.Cut(a, b)
	}
}

// Heal restores the link between a and b.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, linkOf(a, b))
}

// HealAll restores every link.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// Close closes every listener and connection and waits for the Network's
// goroutines.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, p := range n.ports {
		p.ln.Close()
		if p.member != nil {
			p.member.shut()
		}
	}
	var open []*conn
	for _, cs := range n.conns {
		for c := range cs {
			open = append(open, c)
		}
	}
	clear(n.conns)
	n.mu.Unlock()
	for _, c := range open {
		c.Conn.Close()
	}
	n.wg.Wait()
	return nil
}

func (n *Network) accept(p *port) {
	defer n.wg.Done()
	for {
		raw, err := p.ln.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go n.admit(p, raw)
	}
}

// admit reads the preamble naming the caller and hands the connection to
// the member listening on p, unless the link is cut or nobody listens.
func (n *Network) admit(p *port, raw net.Conn) {
	defer n.wg.Done()
	_ = raw.SetReadDeadline(time.Now().Add(n.timeout))
	from, err := readPreamble(raw)
	_ = raw.SetReadDeadline(time.Time{})
	if err != nil {
		raw.Close()
		return
	}
	n.mu.Lock()
	l := linkOf(from, p.addr)
	member := p.member
	if n.closed || n.cut[l] || member == nil {
		n.mu.Unlock()
		raw.Close()
		return
	}
	c := n.trackLocked(l, raw)
	n.mu.Unlock()
	select {
	case member.ch <- c:
	case <-member.done:
		c.Close()
	}
}

func (n *Network) trackLocked(l link, raw net.Conn) *conn {
	c := &conn{Conn: raw, n: n, l: l}
	if n.conns[l] == nil {
		n.conns[l] = make(map[*conn]struct{})
	}
	n.conns[l][c] = struct{}{}
	return c
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

// Endpoint is the Network as one member sees it; it implements
// controller.Network.
type Endpoint struct {
	n    *Network
	addr string
}

// Listen returns the member's listener; addr must be the Endpoint's own.
func (e *Endpoint) Listen(addr string) (net.Listener, error) {
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.ports[addr]
	switch {
	case addr != e.addr || !ok:
		return nil, fmt.Errorf("controllertest: %s is not the reserved address of this endpoint (%s)", addr, e.addr)
	case n.closed:
		return nil, net.ErrClosed
	case p.member != nil:
		return nil, fmt.Errorf("controllertest: %s already listening", addr)
	}
	p.member = &listener{n: n, p: p, ch: make(chan *conn), done: make(chan struct{})}
	return p.member, nil
}

// Dial connects to addr unless the link to it is cut.
func (e *Endpoint) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := e.n
	l := linkOf(e.addr, addr)
	n.mu.Lock()
	cut, closed := n.cut[l], n.closed
	n.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	if cut {
		return nil, fmt.Errorf("%w: %s - %s", ErrLinkCut, e.addr, addr)
	}
	raw, err := n.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pre := binary.BigEndian.AppendUint16(nil, uint16(len(e.addr)))
	if _, err := raw.Write(append(pre, e.addr...)); err != nil {
		raw.Close()
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.cut[l] {
		raw.Close()
		return nil, fmt.Errorf("%w: %s - %s", ErrLinkCut, e.addr, addr)
	}
	return n.trackLocked(l, raw), nil
}

// listener is a member's view of its reserved port.
type listener struct {
	n    *Network
	p    *port
	ch   chan *conn
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

// Close detaches the member; the reserved port stays open for a restart.
func (l *listener) Close() error {
	l.n.mu.Lock()
	if l.p.member == l {
		l.p.member = nil
	}
	l.n.mu.Unlock()
	l.shut()
	return nil
}

func (l *listener) shut() { l.once.Do(func() { close(l.done) }) }

func (l *listener) Addr() net.Addr { return l.p.ln.Addr() }

// conn leaves the Network's books when closed.
type conn struct {
	net.Conn
	n    *Network
	l    link
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns[c.l], c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}
