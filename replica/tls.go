package replica

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/strata-log/strata/controller"
)

// Mutual TLS between members (Config.TLS). The one config secures the
// controller's port (Raft and forwarded controller requests, through
// controller.Config.TLS) and the data plane on Addr: the member's
// kafka.Server requires a client certificate of the cluster's CA, and the
// Kafka-protocol transport the member fetches and forwards with presents
// its own and verifies the leader's. See controller.MutualTLS for what the
// config must hold.
//
// The data plane on Addr is also where Kafka clients connect: with TLS set
// they too need a certificate of the cluster's CA (Kafka's listener with
// ssl.client.auth=required). The in-process LocalNetwork, when used, is
// not a network and has no TLS.

// dataPlaneTLS returns the server and client configs of the data plane,
// nil and nil without TLS.
func (c Config) dataPlaneTLS() (server, client *tls.Config, err error) {
	if c.TLS == nil {
		return nil, nil, nil
	}
	server, client, err = controller.MutualTLS(c.TLS)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return server, client, nil
}

// tlsDial wraps dial with the client handshake of cfg; dial itself when
// cfg is nil.
func tlsDial(dial func(context.Context, string) (net.Conn, error), cfg *tls.Config) func(context.Context, string) (net.Conn, error) {
	if cfg == nil {
		return dial
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return controller.DialTLS(ctx, dial, addr, cfg)
	}
}
