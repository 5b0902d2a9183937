package replica_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaRequest sends req at its version over a connection of its own to
// the Kafka listener at addr, and returns the answer: for a request that
// must reach one member, where a client would pick the broker itself.
func kafkaRequest(addr string, req kmsg.Request) (kmsg.Response, error) {
	return kafkaRequestVia(dialTCP, addr, req)
}

// kafkaRequestVia is kafkaRequest over a connection dial makes: through
// the testnet, to a member whose listener is on it.
func kafkaRequestVia(dial func(context.Context, string) (net.Conn, error), addr string, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	if _, err := nc.Write(f.AppendRequest(nil, req, 1)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:] // the correlation id
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // the header's tagged fields: none
	}
	return resp, resp.ReadFrom(body)
}

// dialTCP dials addr over TCP.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
