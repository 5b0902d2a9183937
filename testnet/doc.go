// Package testnet is a network for tests whose links can be cut: real
// loopback TCP between named nodes, through a switchboard that knows which
// node every connection comes from. It is the network twin of Strata's
// cluster tests (controller quorums, replicating brokers, Kafka clients
// against a cluster), and of fixtures that let an application's tests
// partition the cluster it talks to.
//
//	n := testnet.New()
//	defer n.Close()
//	b1 := n.Node("broker-1")
//	addr, _ := b1.Reserve()      // a free 127.0.0.1 port, held until n.Close
//	ln, _ := b1.Listen(addr)     // a net.Listener; Close it and Listen again to restart
//	conn, _ := n.Node("client").Dial(ctx, addr) // a *net.TCPConn
//	n.Cut("client", "broker-1")  // conn is closed; new dials fail with ErrLinkCut
//	n.Heal("client", "broker-1")
//	n.Isolate("broker-1")        // cut from every other node, also ones named later
//	n.Partition([]string{"broker-1", "broker-2"}, []string{"broker-3"})
//	n.HealAll()
//
// A *Node has the Listen and Dial methods of controller.Network, and a
// DialContext(ctx, network, addr) for clients that take a dial function
// (kgo.Dialer, net.Dialer-shaped hooks). Connections are the operating
// system's *net.TCPConn, so deadlines, sendfile and splice behave as in
// production; each one starts with a short preamble, read by the Network
// before the listener sees the connection, naming the node that dialed.
//
// A link that goes down closes the connections open on it, both ways, and
// refuses new ones at once with ErrLinkCut (a real partition would make
// them time out; a test wants to know now). A node's link to itself never
// goes down.
package testnet
