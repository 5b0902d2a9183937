package interop

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/controller/controllertest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/testnet"
)

// startListenerCluster starts three members with mutual TLS between them
// (cluster CA) and a client listener each, TLS with a certificate of
// clientCA and SASL/SCRAM-SHA-256 for users; it returns the cluster and
// each member's client listener address (index id-1).
func startListenerCluster(t *testing.T, clientCA *controllertest.CA, users map[string]string) (*cluster, []string) {
	t.Helper()
	clusterCA, err := controllertest.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]kafka.SCRAMCredential{}
	for u, p := range users {
		if creds[u], err = kafka.NewSCRAMCredential("SCRAM-SHA-256", p, 4096); err != nil {
			t.Fatal(err)
		}
	}
	sasl := &kafka.SASLConfig{SCRAM256: func(u string) (kafka.SCRAMCredential, bool) { c, ok := creds[u]; return c, ok }}
	clientAddrs := make([]string, 3)
	c := startClusterWith(t, 3, "every member registered with its listener",
		func(i int, node *testnet.Node, cfg *replica.Config) {
			var err error
			if clientAddrs[i-1], err = node.Reserve(); err != nil {
				t.Fatal(err)
			}
			if cfg.TLS, err = clusterCA.Config(memberNode(i)); err != nil {
				t.Fatal(err)
			}
			cert, err := clientCA.Issue(memberNode(i))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Listeners = []replica.Listener{{
				Name: "CLIENT", Addr: clientAddrs[i-1], SASL: sasl,
				TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			}}
		},
		func(bi controller.BrokerInfo) bool { _, ok := bi.Listener("CLIENT"); return ok })
	return c, clientAddrs
}

// tlsDialer dials through the testnet as the node "client", then TLS
// trusting only pool.
func (c *cluster) tlsDialer(pool *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := c.dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := pool.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
}

// brokerAddrs returns what a Metadata request answered (not kadm's
// cached metadata): node id → host:port.
func brokerAddrs(ctx context.Context, t *testing.T, cl *kgo.Client) map[int32]string {
	t.Helper()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	out := map[int32]string{}
	for _, b := range md.Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	return out
}

// kgo, holding only the client listener's CA and a SCRAM password,
// against a cluster with mutual TLS between members: Metadata gives the
// client-listener addresses only; it produces with acks=all and consumes
// in a group across the stop of a member that leads a partition and
// coordinates the group; on the inter-broker address it is refused.
func TestKgoClientListenerTLSAndSCRAM(t *testing.T) {
	clientCA, err := controllertest.NewCA("clients")
	if err != nil {
		t.Fatal(err)
	}
	c, listeners := startListenerCluster(t, clientCA, map[string]string{"alice": "s3cret"})
	ctx := testCtx(t, 90*time.Second)
	const topic, parts, n = "orders", 3, 200
	if err := c.any().CreateTopic(ctx, topic, log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2}); err != nil {
		t.Fatal(err)
	}
	trust := &tls.Config{RootCAs: clientCA.Pool(), MinVersion: tls.VersionTLS12}
	newClient := func(seeds []string, password string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(seeds...), kgo.Dialer(c.tlsDialer(trust)),
			kgo.SASL(scram.Auth{User: "alice", Pass: password}.AsSha256Mechanism()),
		}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	meta := newClient(listeners, "s3cret")
	adm := kadm.NewClient(meta)
	want := func() map[int32]string {
		out := map[int32]string{}
		for _, b := range c.members {
			if b != nil {
				addr, _ := b.ListenerAddr("CLIENT")
				out[int32(b.ID())] = addr
			}
		}
		return out
	}
	if got := brokerAddrs(ctx, t, meta); fmt.Sprint(got) != fmt.Sprint(want()) {
		t.Fatalf("Metadata on the client listener: %v, want the client listeners %v", got, want())
	}

	// The refusals: the inter-broker address (no cluster certificate), a
	// wrong password.
	for name, cl := range map[string]*kgo.Client{
		"on the inter-broker address": newClient(c.seeds(), "s3cret", kgo.RequestRetries(0)),
		"with a wrong password":       newClient(listeners, "wrong", kgo.RequestRetries(0)),
	} {
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.Ping(short)
		cancel()
		if err == nil {
			t.Errorf("kgo %s was served", name)
		}
	}

	c.createOffsetsTopic(ctx, adm)
	victim, group := 0, ""
	for p := range parts {
		if g, ok := c.groupLedBy(c.leader(topic, p)); ok {
			victim, group = c.leader(topic, p), g
			break
		}
	}
	if group == "" {
		t.Fatalf("no leader of %s leads a partition of %s", topic, log.OffsetsTopic)
	}

	prod := newClient(listeners, "s3cret", kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "value-%03d", i)}).FirstErr(); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
	}
	cons := newClient(listeners, "s3cret", kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]bool{}
	consumeUntil := func(k int) {
		t.Helper()
		for len(seen) < k {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d distinct records, want %d", len(seen), k)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
	}
	produce(0, n/2)
	consumeUntil(n / 2)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	c.stop(victim)
	produce(n/2, n)
	consumeUntil(n)
	for i := range n {
		if v := fmt.Sprintf("value-%03d", i); !seen[v] {
			t.Errorf("%s not consumed", v)
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit after the stop: %v", err)
	}
	c.waitImage(fmt.Sprintf("member %d fenced", victim), func(img *controller.Image) bool {
		bi, ok := img.Broker(victim)
		return ok && bi.Fenced
	})
	if got := brokerAddrs(ctx, t, meta); len(got) != 2 || fmt.Sprint(got) != fmt.Sprint(want()) {
		t.Fatalf("Metadata after member %d stopped: %v, want %v", victim, got, want())
	}
}
