package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/strata-log/strata/metrics"
)

// Config configures a Server. The zero value means the defaults, Kafka's
// where Kafka has one.
type Config struct {
	// NodeID is this broker's id in Metadata and DescribeCluster; 0 → 1.
	NodeID int32
	// ClusterID is reported in Metadata and DescribeCluster; "" → "strata".
	ClusterID string
	// AdvertisedAddr is the host:port given to clients in Metadata; "" →
	// the bound address (Server.Addr).
	AdvertisedAddr string
	// AutoCreateTopics creates a topic, with the broker's defaults, the
	// first time a client asks Metadata for it and allows auto-creation
	// (Kafka's auto.create.topics.enable, which is true by default there;
	// false here, so that a typo does not make a topic).
	AutoCreateTopics bool
	// TLS, when set, makes every connection TLS (crypto/tls).
	TLS *tls.Config
	// SASL, when set, makes every connection authenticate with one of its
	// mechanisms before it may send anything but ApiVersions, SaslHandshake
	// and SaslAuthenticate.
	SASL *SASLConfig
	// MaxRequestBytes is the largest request accepted, its 4-byte size
	// excluded; a larger one closes the connection. 0 → 100 MiB (Kafka's
	// socket.request.max.bytes).
	MaxRequestBytes int
	// MaxConnections is the most connections served at once; one more is
	// closed as it is accepted. 0 → 10000.
	MaxConnections int
	// MaxInFlight is the most requests of one connection read but not yet
	// answered; the connection is not read further until one is answered.
	// 0 → 32.
	MaxInFlight int
	// IdleTimeout closes a connection that sent nothing and waits for
	// nothing that long. 0 → 10 min (Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// Logger receives the server's log lines; nil → discard.
	Logger *slog.Logger
	// Listener, when set, is served instead of listening on the address
	// given to Listen (tests: a testnet listener whose links can be cut).
	Listener net.Listener
	// Metrics, when set, is told of every request answered (its API, time,
	// bytes and whether it failed), the records and bytes produced to each
	// topic and the bytes fetched from it (see metrics.Hooks); nil → none.
	Metrics metrics.Hooks
}

// SASLConfig lists the mechanisms a Server accepts and their credentials.
// A mechanism with a nil lookup is not offered.
type SASLConfig struct {
	// Plain returns the password of a user for PLAIN, false if there is no
	// such user.
	Plain func(user string) (password string, ok bool)
	// SCRAM256 and SCRAM512 return a user's SCRAM-SHA-256 and
	// SCRAM-SHA-512 credentials (see NewSCRAMCredential), false if there is
	// no such user.
	SCRAM256 func(user string) (SCRAMCredential, bool)
	SCRAM512 func(user string) (SCRAMCredential, bool)
}

// Kafka's defaults.
const (
	defaultMaxRequestBytes = 100 << 20
	defaultMaxConnections  = 10000
	defaultMaxInFlight     = 32
	defaultIdleTimeout     = 10 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.ClusterID == "" {
		c.ClusterID = "strata"
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = defaultMaxInFlight
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrInvalidConfig is returned by Listen for a Config that cannot work.
var ErrInvalidConfig = errors.New("kafka: invalid config")

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.NodeID < 0:
		return bad("negative node id %d", c.NodeID)
	case c.MaxRequestBytes < 0:
		return bad("negative max request bytes %d", c.MaxRequestBytes)
	case c.MaxConnections < 0:
		return bad("negative max connections %d", c.MaxConnections)
	case c.MaxInFlight < 0:
		return bad("negative max in flight %d", c.MaxInFlight)
	case c.IdleTimeout < 0:
		return bad("negative idle timeout %v", c.IdleTimeout)
	case c.SASL != nil && c.SASL.Plain == nil && c.SASL.SCRAM256 == nil && c.SASL.SCRAM512 == nil:
		return bad("SASL without a mechanism")
	}
	return nil
}
