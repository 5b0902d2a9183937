package testnet_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/testnet"
)

func Example() {
	n := testnet.New()
	defer n.Close()
	broker := n.Node("broker-1")
	addr, _ := broker.Reserve()
	ln, _ := broker.Listen(addr)
	defer ln.Close()

	client := n.Node("client")
	_, err := client.Dial(context.Background(), addr)
	fmt.Println("dial:", err)
	accepted, _ := ln.Accept()

	n.Cut("client", "broker-1") // both ends are closed
	_, err = accepted.Read(make([]byte, 1))
	fmt.Println("read after cut fails:", err != nil)
	_, err = client.Dial(context.Background(), addr)
	fmt.Println("dial across the cut:", errors.Is(err, testnet.ErrLinkCut))

	n.Heal("client", "broker-1")
	conn, err := client.Dial(context.Background(), addr)
	fmt.Println("dial after heal:", err)
	conn.Close()
	// Output:
	// dial: <nil>
	// read after cut fails: true
	// dial across the cut: true
	// dial after heal: <nil>
}
