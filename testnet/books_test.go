package testnet

import (
	"context"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
)

// TestBooksForgetClosedConns: a link's books let go of connections their
// owners closed, so a long test that reconnects often does not grow them.
func TestBooksForgetClosedConns(t *testing.T) {
	leaktest.Check(t)
	n := New()
	defer n.Close()
	addr, err := n.Node("a").Reserve()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := n.Node("a").Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range 200 {
		d, err := n.Node("b").Dial(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		acc.Close()
	}
	n.mu.Lock()
	kept := len(n.conns[linkOf("a", "b")])
	n.mu.Unlock()
	if kept > 40 {
		t.Fatalf("%d closed connections kept on the books", kept)
	}
}
