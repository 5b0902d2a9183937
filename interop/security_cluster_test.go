package interop

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/testnet"
)

// startSecuredCluster starts three members, each with a client listener
// that takes SCRAM-SHA-256 users (users: the bootstrap users file) and
// checks ACLs, admin a super user; it returns the cluster and the
// listeners' addresses (index id-1).
func startSecuredCluster(t *testing.T, users map[string]string) (*cluster, []string) {
	t.Helper()
	creds := map[string]kafka.SCRAMCredential{}
	for u, p := range users {
		var err error
		if creds[u], err = kafka.NewSCRAMCredential("SCRAM-SHA-256", p, 4096); err != nil {
			t.Fatal(err)
		}
	}
	sasl := &kafka.SASLConfig{SCRAM256: func(u string) (kafka.SCRAMCredential, bool) { c, ok := creds[u]; return c, ok }}
	addrs := make([]string, 3)
	c := startClusterWith(t, 3, "every member registered with its listener",
		func(i int, node *testnet.Node, cfg *replica.Config) {
			var err error
			if addrs[i-1], err = node.Reserve(); err != nil {
				t.Fatal(err)
			}
			cfg.Listeners = []replica.Listener{{Name: "CLIENT", Addr: addrs[i-1], SASL: sasl}}
			cfg.Authorizer = &acl.Config{SuperUsers: []string{"User:admin"}}
		},
		func(bi controller.BrokerInfo) bool { _, ok := bi.Listener("CLIENT"); return ok })
	return c, addrs
}

// scramClient is a kgo client logged in as user on the listeners.
func (c *cluster) scramClient(t *testing.T, listeners []string, user, password string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(listeners...), kgo.Dialer(c.dial),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// onlyMember is a kgo client logged in as user that talks to the listener
// at addr only, whatever broker it means to reach: what it asks, that
// member answers.
func (c *cluster) onlyMember(t *testing.T, addr, user, password string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) { return c.dial(ctx, network, addr) }
	return c.scramClient(t, []string{addr}, user, password, append([]kgo.Opt{kgo.Dialer(dial)}, opts...)...)
}
