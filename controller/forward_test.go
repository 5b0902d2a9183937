package controller

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestForwardCutAfterSendIsOutcomeUnknown: the active controller dies after
// a forwarded request reached it (here: it reads the request and hangs up).
// The forwarding member cannot know whether the change took effect, so the
// error is ErrLeadershipLost, which callers whose change may be asked for
// again (a producer-id block) retry; it is not ErrNotController, which says
// the request was never sent.
func TestForwardCutAfterSendIsOutcomeUnknown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		if kind, err := r.ReadByte(); err != nil || kind != streamRPC {
			served <- errors.Join(err, errors.New("not an RPC stream"))
			return
		}
		if _, err := conn.Write([]byte{rpcAck}); err != nil {
			served <- err
			return
		}
		var o op
		served <- readFrame(r, &o) // the request arrived; then the controller dies
	}()

	own, err := net.Listen("tcp", "127.0.0.1:0") // the member's own address, not served here
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{ctx: context.Background(), mux: newMux(own, TCPNetwork{}, slog.New(slog.DiscardHandler), nil)}
	defer c.mux.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.forward(ctx, 2, ln.Addr().String(), op{Kind: opAllocateProducerIDs, ProducerIDs: AllocateProducerIDsRequest{BrokerID: 1, BrokerEpoch: 1}})
	if serr := <-served; serr != nil {
		t.Fatalf("fake controller: %v", serr)
	}
	if !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("forward cut after send = %v, want ErrLeadershipLost (outcome unknown)", err)
	}
	if errors.Is(err, ErrNotController) {
		t.Fatalf("forward cut after send = %v: ErrNotController would say it was never sent", err)
	}
}
