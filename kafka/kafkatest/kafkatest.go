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
//
// To test an application's authorization failures, start the fixture with
// SASL users, a super user and ACLs enforced, and log in as each:
//
//	c := kafkatest.New(t,
//		kafkatest.SASLUser("SCRAM-SHA-256", "admin", "admin-secret"),
//		kafkatest.SASLUser("SCRAM-SHA-256", "app", "app-secret"),
//		kafkatest.SuperUser("admin"),
//		kafkatest.EnableACLs(),
//		kafkatest.Topic("orders", 3))
//
// The app user is refused everything (TOPIC_AUTHORIZATION_FAILED and the
// like) until an ACL allows it: kafkatest.ACL at start, or kadm's
// CreateACLs as admin.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// Option configures a fixture.
type Option func(*options)

type options struct {
	broker []logtest.Option
	server kafka.Config
	// users by mechanism, then name: their passwords (SASLUser).
	users      map[string]map[string]string
	superUsers []string
	acls       bool
	bindings   []acl.Binding
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

// SASLUser adds a user who logs in with mechanism ("PLAIN",
// "SCRAM-SHA-256" or "SCRAM-SHA-512") and password (kfake's User). With
// one SASLUser or more, every connection must authenticate: the listener
// offers the mechanisms that have users.
func SASLUser(mechanism, user, password string) Option {
	return func(o *options) {
		if o.users == nil {
			o.users = map[string]map[string]string{}
		}
		if o.users[mechanism] == nil {
			o.users[mechanism] = map[string]string{}
		}
		o.users[mechanism][user] = password
	}
}

// SuperUser makes user (principal User:<user>) a super user, allowed
// everything once ACLs are enabled (Kafka's super.users; kfake's
// Superuser).
func SuperUser(user string) Option {
	return func(o *options) { o.superUsers = append(o.superUsers, acl.User(user)) }
}

// EnableACLs enforces ACLs (kfake's EnableACLs): a request is denied
// unless a super user sends it or an ACL allows it (Kafka's authorizer,
// allow.everyone.if.no.acl.found false). ACLs are created with ACL, or by
// a super user over the protocol (CreateAcls, e.g. kadm's CreateACLs).
func EnableACLs() Option {
	return func(o *options) { o.acls = true }
}

// ACL creates bindings when the fixture starts.
func ACL(bindings ...acl.Binding) Option {
	return func(o *options) { o.bindings = append(o.bindings, bindings...) }
}

// saslConfig is the server's SASL configuration for the users of o, nil
// if none.
func (o *options) saslConfig() (*kafka.SASLConfig, error) {
	if len(o.users) == 0 {
		return nil, nil
	}
	cfg := &kafka.SASLConfig{}
	for mech, users := range o.users {
		switch mech {
		case "PLAIN":
			cfg.Plain = func(u string) (string, bool) { p, ok := users[u]; return p, ok }
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			creds := map[string]kafka.SCRAMCredential{}
			for u, p := range users {
				c, err := kafka.NewSCRAMCredential(mech, p, 0)
				if err != nil {
					return nil, err
				}
				creds[u] = c
			}
			lookup := func(u string) (kafka.SCRAMCredential, bool) { c, ok := creds[u]; return c, ok }
			if mech == "SCRAM-SHA-256" {
				cfg.SCRAM256 = lookup
			} else {
				cfg.SCRAM512 = lookup
			}
		default:
			return nil, fmt.Errorf("SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", mech)
		}
	}
	return cfg, nil
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
	sasl, err := o.saslConfig()
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	if sasl != nil && o.server.SASL == nil {
		o.server.SASL = sasl
	}
	if o.acls && o.server.Authorizer == nil {
		o.server.Authorizer = &acl.Config{SuperUsers: o.superUsers}
	}
	b := logtest.New(t, append([]logtest.Option{logtest.InMemory()}, o.broker...)...)
	if len(o.bindings) > 0 {
		errs, err := b.CreateACLs(context.Background(), o.bindings)
		if err = errors.Join(append(errs, err)...); err != nil {
			t.Fatalf("kafkatest: ACL: %v", err)
		}
	}
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
