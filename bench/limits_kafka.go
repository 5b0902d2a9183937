package main

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// The limits of the Kafka-protocol cases, measured only when their case
// runs: what any fixture that listens, and any server a kgo client talks
// to, cannot beat on this machine.
const (
	limitListener   = "listener"
	limitKgoProduce = "kgo-null-produce"
	limitKgoConsume = "kgo-null-consume"
)

// kafkaLimits are limitDefs for the fixture and server cases.
func kafkaLimits() []limitDef {
	return []limitDef{
		{key: limitListener, short: "listener", caseName: "fixture", perOp: true,
			name: "a bare listener on 127.0.0.1:0 + accept goroutine, started and stopped",
			what: "net.ListenConfig.Listen (no MPTCP, as kafka.Listen), an accept goroutine, Addr, Close, the goroutine joined, back to back; ops = starts (× limit: starts/s over these)",
			run:  func(e *env) (sample, error) { return repeat(fixtureStarts(e), bareListener) }},
		{key: limitKgoProduce, short: "kgo → null", caseName: "server",
			name: "kgo producing 100 B records to a server that stores nothing",
			what: "as the kgo produce case, against a Kafka-protocol responder (ApiVersions, Metadata, InitProducerId, Produce acked with counted offsets, records dropped); ops = records",
			run: func(e *env) (sample, error) {
				return kgoProduceServer(e, nullServer, serverRecordSize, serverRecords(e))
			}},
		{key: limitKgoConsume, short: "kgo ← null", caseName: "server",
			name: "kgo consuming 100 B records from a server that stores nothing",
			what: "as the kgo consume case, against the same responder: Fetch fills each response (up to the partition's max bytes) with copies of the largest batch kgo produced to it, at consecutive offsets from the one asked for; ops = records",
			run: func(e *env) (sample, error) {
				return kgoConsumeServer(e, nullServer, serverRecordSize, serverRecords(e))
			}},
	}
}

// bareListener is the least a fixture that listens does: listen on
// loopback as kafka.Listen does, start a goroutine accepting connections,
// and at the end close the listener and join the goroutine.
func bareListener() error {
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
		err = fmt.Errorf("listener: no address")
	}
	if cerr := ln.Close(); err == nil {
		err = cerr
	}
	wg.Wait()
	return err
}
