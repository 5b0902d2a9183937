// Package kafkatest starts a Strata broker that speaks the Kafka protocol,
// as a unit-test fixture for applications that use a Kafka client: an
// in-memory broker with a listener on loopback and topics created, closed
// by t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		c := kafkatest.New(t, kafkatest.Topic("orders", 3))
//		cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Addr()))
//		defer cl.Close()
//		...
//	}
package kafkatest

import (
	"testing"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// Option configures a fixture.
type Option func(*options)

type options struct {
	broker []logtest.Option
	server kafka.Config
}

// Topic creates a topic with n partitions.
func Topic(name string, partitions int) Option {
	return func(o *options) { o.broker = append(o.broker, logtest.Topic(name, partitions)) }
}

// TopicWithConfig creates a topic with cfg.
func TopicWithConfig(name string, cfg log.TopicConfig) Option {
	return func(o *options) { o.broker = append(o.broker, logtest.TopicWithConfig(name, cfg)) }
}

// Seed appends records to a topic once the broker is up (see logtest.Seed).
func Seed(name string, recs ...log.Record) Option {
	return func(o *options) { o.broker = append(o.broker, logtest.Seed(name, recs...)) }
}

// WithServerConfig sets the Kafka server's configuration (SASL, TLS,
// limits); its defaults otherwise.
func WithServerConfig(cfg kafka.Config) Option {
	return func(o *options) { o.server = cfg }
}

// Cluster is a running fixture: one broker and its Kafka listener.
type Cluster struct {
	b   *log.Broker
	srv *kafka.Server
}

// New starts a fixture for the test and closes it in t.Cleanup (failing the
// test if Close fails). It fails the test at once if it cannot start.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := logtest.New(t, append([]logtest.Option{logtest.InMemory()}, o.broker...)...)
	srv, err := kafka.Listen("127.0.0.1:0", b, o.server)
	if err != nil {
		t.Fatalf("kafkatest: listen: %v", err)
	}
	// Cleanups run last-in first-out: the server closes before the broker.
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("kafkatest: close server: %v", err)
		}
	})
	return &Cluster{b: b, srv: srv}
}

// Addr is the listener's host:port: the seed broker for any Kafka client.
func (c *Cluster) Addr() string { return c.srv.Addr() }

// Broker is the broker behind the listener, for checking what clients
// wrote or seeding what they read through Strata's own API.
func (c *Cluster) Broker() *log.Broker { return c.b }
