package kafka

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/txn"
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
	// Authorizer, when set, authorizes every request as Kafka's
	// authorizer does (see package acl): the bindings are the backend's
	// (ACLBackend; none without one), and a request not allowed is
	// answered with its *_AUTHORIZATION_FAILED code and changes nothing.
	// Nil: every request is allowed (Kafka without authorizer.class.name).
	Authorizer *acl.Config
	// MaxRequestBytes is the largest request accepted, its 4-byte size
	// excluded; a larger one closes the connection. 0 → 100 MiB (Kafka's
	// socket.request.max.bytes).
	MaxRequestBytes int
	// MaxConnections is the most connections served at once; one more is
	// closed as it is accepted. 0 → 10000.
	MaxConnections int
	// MaxConnectionsPerIP is the most connections served at once from
	// one IP address (Kafka's max.connections.per.ip); one more is closed
	// as it is accepted. 0 → 1000, a tenth of MaxConnections' default, so
	// that one address cannot take every connection (Kafka's default has
	// no limit); negative → no limit.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides sets the limit of some IP addresses
	// (Kafka's max.connections.per.ip.overrides; 0 refuses every
	// connection from the address). Keys are IP addresses as net.ParseIP
	// reads them, not host names.
	MaxConnectionsPerIPOverrides map[string]int
	// RequestTimeout closes a connection that began a request and did not
	// send the rest of it within that long (slow senders), or that sent no
	// whole request that long after it was accepted (a TLS handshake or a
	// first request that never comes). A request of more than 1 MiB gets
	// a second more for every MiB. 0 → 30 s.
	RequestTimeout time.Duration
	// AuthenticationTimeout closes a connection that must authenticate
	// (SASL) and has not done so that long after it was accepted. 0 →
	// 30 s.
	AuthenticationTimeout time.Duration
	// FailedAuthenticationDelay delays the answer to a failed
	// authentication and the close that follows, as Kafka's
	// connection.failed.authentication.delay.ms does, to slow down
	// password guessing. The connection's goroutines wait, not the
	// server's. 0 → 100 ms (Kafka's default); negative → none.
	FailedAuthenticationDelay time.Duration
	// FetchMaxBytes bounds the record bytes of one Fetch response
	// (Kafka's fetch.max.bytes), whatever MaxBytes the request asks: the
	// first partition with records returns one whole batch all the same.
	// 0 → 55 MiB (Kafka's default, 57671680).
	FetchMaxBytes int
	// MaxInFlight is the most requests of one connection read but not yet
	// answered; the connection is not read further until one is answered.
	// 0 → 32.
	MaxInFlight int
	// IdleTimeout closes a connection that sent nothing and waits for
	// nothing that long. 0 → 10 min (Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// TransactionVersion is the transaction.version feature the server
	// finalizes in ApiVersions (a standalone broker's, or a cluster
	// member's: the members share it). 0 → 2, as Kafka 4 formats
	// a new cluster: KIP-890 part 2, an epoch bump per transaction,
	// partitions and groups added by Produce v12 and TxnOffsetCommit v5,
	// so that Kafka 4 clients skip AddPartitionsToTxn and AddOffsetsToTxn.
	// Negative → 0 (Kafka's transaction.version=0): none finalized, clients
	// add partitions and groups themselves and keep their epoch; 1 is the
	// same for clients (Kafka's level 1 changes only the coordinator's
	// record format).
	TransactionVersion int16
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

	defaultMaxConnectionsPerIP       = 1000
	defaultRequestTimeout            = 30 * time.Second
	defaultAuthenticationTimeout     = 30 * time.Second
	defaultFailedAuthenticationDelay = 100 * time.Millisecond
	defaultFetchMaxBytes             = 55 << 20
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
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = defaultMaxConnectionsPerIP
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.AuthenticationTimeout == 0 {
		c.AuthenticationTimeout = defaultAuthenticationTimeout
	}
	switch {
	case c.FailedAuthenticationDelay == 0:
		c.FailedAuthenticationDelay = defaultFailedAuthenticationDelay
	case c.FailedAuthenticationDelay < 0:
		c.FailedAuthenticationDelay = 0
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = defaultFetchMaxBytes
	}
	switch {
	case c.TransactionVersion == 0:
		c.TransactionVersion = txn.TV2
	case c.TransactionVersion < 0:
		c.TransactionVersion = 0
	}
	if len(c.MaxConnectionsPerIPOverrides) > 0 {
		// A copy keyed by the canonical form of each address.
		over := make(map[string]int, len(c.MaxConnectionsPerIPOverrides))
		for ip, n := range c.MaxConnectionsPerIPOverrides {
			over[net.ParseIP(ip).String()] = n
		}
		c.MaxConnectionsPerIPOverrides = over
	}
	return c
}

// ErrInvalidConfig is returned by Listen for a Config that cannot work.
var ErrInvalidConfig = errs.Mark("kafka: invalid config", log.ErrInvalidConfig) // matches log.ErrInvalidConfig

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
	case c.RequestTimeout < 0:
		return bad("negative request timeout %v", c.RequestTimeout)
	case c.AuthenticationTimeout < 0:
		return bad("negative authentication timeout %v", c.AuthenticationTimeout)
	case c.FetchMaxBytes < 0 || c.FetchMaxBytes > math.MaxInt32:
		return bad("fetch max bytes %d (0 to %d)", c.FetchMaxBytes, math.MaxInt32)
	case c.TransactionVersion > txn.TV2:
		return bad("transaction version %d (at most %d)", c.TransactionVersion, txn.TV2)
	}
	for ip, n := range c.MaxConnectionsPerIPOverrides {
		switch {
		case net.ParseIP(ip) == nil:
			return bad("max connections per IP override for %q: not an IP address", ip)
		case n < 0:
			return bad("max connections per IP override for %s: negative %d", ip, n)
		}
	}
	return nil
}
