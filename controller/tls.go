package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// Mutual TLS between members. One *tls.Config, given as Config.TLS, serves
// both ends: its Certificates are the member's own (presented as a server
// and as a client), and its RootCAs (or ClientCAs) the cluster's CA, the
// only one whose certificates are accepted, in both directions. A peer
// without a certificate, or with one of another CA, is refused at the
// handshake, before a byte of Raft or of a forwarded request is read.

// MutualTLS derives the server and client configs of mutual TLS from cfg
// (see above). The server requires and verifies client certificates
// against the CA; the client verifies the server's against it, and its
// name against the address dialed unless cfg.ServerName is set. cfg is
// not modified. It fails with ErrInvalidConfig when cfg has no
// certificate or no CA.
func MutualTLS(cfg *tls.Config) (server, client *tls.Config, err error) {
	if cfg == nil {
		return nil, nil, fmt.Errorf("%w: nil TLS config", ErrInvalidConfig)
	}
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil {
		return nil, nil, fmt.Errorf("%w: TLS config without a certificate", ErrInvalidConfig)
	}
	cas := cfg.RootCAs
	if cas == nil {
		cas = cfg.ClientCAs
	}
	if cas == nil {
		return nil, nil, fmt.Errorf("%w: TLS config without the cluster's CA (RootCAs or ClientCAs)", ErrInvalidConfig)
	}
	server = cfg.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	if server.ClientCAs == nil {
		server.ClientCAs = cas
	}
	client = cfg.Clone()
	if client.RootCAs == nil {
		client.RootCAs = cas
	}
	if client.GetClientCertificate == nil && len(client.Certificates) == 0 && cfg.GetCertificate != nil {
		return nil, nil, fmt.Errorf("%w: TLS config needs Certificates (or GetClientCertificate) to act as a client", ErrInvalidConfig)
	}
	return server, client, nil
}

// TLSNetwork returns inner with mutual TLS on every connection (see
// MutualTLS): listeners hand out server-side TLS connections, which
// handshake on first use, and Dial returns a client connection that has
// completed its handshake.
func TLSNetwork(inner Network, cfg *tls.Config) (Network, error) {
	if inner == nil {
		inner = TCPNetwork{}
	}
	server, client, err := MutualTLS(cfg)
	if err != nil {
		return nil, err
	}
	return &tlsNetwork{inner: inner, server: server, client: client}, nil
}

type tlsNetwork struct {
	inner          Network
	server, client *tls.Config
}

func (n *tlsNetwork) Listen(addr string) (net.Listener, error) {
	ln, err := n.inner.Listen(addr)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, n.server), nil
}

func (n *tlsNetwork) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return DialTLS(ctx, n.inner.Dial, addr, n.client)
}

// DialTLS dials addr with dial and runs the client handshake of cfg over
// the connection, naming the host of addr as the server unless
// cfg.ServerName is set. On failure the connection is closed.
func DialTLS(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string, cfg *tls.Config) (net.Conn, error) {
	raw, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}
