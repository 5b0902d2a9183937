package controllertest

import (
	"fmt"
	"sync"

	"github.com/strata-log/strata/testnet"
)

// ErrLinkCut is returned by Dial across a cut link: testnet.ErrLinkCut.
var ErrLinkCut = testnet.ErrLinkCut

// Network is a switchboard of real loopback TCP connections whose links a
// test can cut and heal, addressed by member address: a testnet.Network in
// which each reserved address is a node of its own. Each member address is
// reserved once (a listening socket kept open until Close, so no other test
// can take the port, and a member can restart on it); a cut applies to
// both directions and closes the connections already open on that link.
//
// New tests can use package testnet directly: its nodes have names, may
// hold several addresses, and include clients that do not listen.
type Network struct {
	net *testnet.Network

	mu    sync.Mutex
	seq   int               // members reserved (or being reserved)
	nodes map[string]string // reserved address → node name
}

// Endpoint is the Network as one member sees it; it implements
// controller.Network.
type Endpoint = testnet.Node

// NewNetwork returns an empty Network.
func NewNetwork() *Network {
	return &Network{net: testnet.New(), nodes: make(map[string]string)}
}

// Reserve opens a listening socket on a free 127.0.0.1 port and returns its
// address, for one member.
func (n *Network) Reserve() (string, error) {
	n.mu.Lock()
	n.seq++
	name := fmt.Sprintf("member-%d", n.seq)
	n.mu.Unlock()
	addr, err := n.net.Node(name).Reserve()
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.nodes[addr] = name
	n.mu.Unlock()
	return addr, nil
}

// node returns the node of a member address; an address never reserved
// is a node of its own.
func (n *Network) node(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.nodes[addr]; ok {
		return name
	}
	return addr
}

// Endpoint returns the controller.Network for the member at addr.
func (n *Network) Endpoint(addr string) *Endpoint { return n.net.Node(n.node(addr)) }

// Cut cuts the link between a and b, both ways, closing its connections.
func (n *Network) Cut(a, b string) { n.net.Cut(n.node(a), n.node(b)) }

// Isolate cuts every link of a to the other reserved addresses.
func (n *Network) Isolate(a string) {
	n.mu.Lock()
	var others []string
	for addr := range n.nodes {
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
func (n *Network) Heal(a, b string) { n.net.Heal(n.node(a), n.node(b)) }

// HealAll restores every link.
func (n *Network) HealAll() { n.net.HealAll() }

// Close closes every listener and connection and waits for the Network's
// goroutines.
func (n *Network) Close() error { return n.net.Close() }
