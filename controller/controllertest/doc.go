// Package controllertest has what tests of a controller quorum need: a
// loopback TCP Network whose links can be cut (a testnet.Network addressed
// by member address), and a Clock the test advances by hand (the one fake,
// clocktest.Clock, which new tests use directly).
//
//	net := controllertest.NewNetwork()
//	defer net.Close()
//	addr, _ := net.Reserve() // a free 127.0.0.1 port, held for the test's life
//	cfg := controller.Config{RaftAddr: addr, Network: net.Endpoint(addr), ...}
//	...
//	net.Isolate(addr) // every link to addr is cut, open connections closed
//	net.HealAll()
package controllertest
