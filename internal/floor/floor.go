// Package floor holds the raw limits that the benchmarks of several
// packages and of the bench module measure Strata against.
package floor

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Listener is the least a fixture that listens does: listen on loopback as
// kafka.Listen does (no MPTCP), start a goroutine accepting connections,
// read the address, close the listener and join the goroutine.
func Listener() error {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Close()
		}
	}()
	if ln.Addr().String() == "" {
		err = errors.New("floor: listener without an address")
	}
	if cerr := ln.Close(); err == nil {
		err = cerr
	}
	wg.Wait()
	return err
}
