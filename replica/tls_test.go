package replica_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/controller/controllertest"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/replicatest"
	"github.com/strata-log/strata/testnet"
)

// startClusterWith starts n members on loopback links that can be cut,
// replicating over transport ("local" or "kafka"), with every member's
// config changed by tweak (nil: unchanged), from the first start on.
func startClusterWith(t testing.TB, n int, transport string, tweak func(*replica.Config)) *memberCluster {
	t.Helper()
	c := newMemberCluster(t, n, transport)
	for i := 1; i <= n; i++ {
		c.startMemberWith(i, tweak)
	}
	c.waitLive(n)
	return c
}

// newMemberCluster sets up n members (addresses, data dirs, Close at the
// end of the test) without starting any.
func newMemberCluster(t testing.TB, n int, transport string) *memberCluster {
	t.Helper()
	c := &memberCluster{t: t, net: testnet.New(), local: replicatest.NewLocalNetwork(), kafka: transport == "kafka"}
	t.Cleanup(func() { c.net.Close() })
	for i := 1; i <= n; i++ {
		raft, err := c.net.Node(node(i)).Reserve()
		require.NoError(t, err)
		data := "127.0.0.1:0"
		if c.kafka {
			data, err = c.net.Node(node(i)).Reserve()
			require.NoError(t, err)
		}
		c.peers = append(c.peers, replica.Peer{ID: i, Addr: data, RaftAddr: raft})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.members = make([]*replica.Broker, n)
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i + 1)
		}
	})
	return c
}

// A cluster forms and replicates over mutual TLS, on the Raft ports and on
// the Kafka-protocol data plane; a peer without a certificate of the
// cluster's CA is refused on both.
func TestMutualTLSCluster(t *testing.T) {
	leaktest.Check(t)
	ca, err := controllertest.NewCA("cluster")
	require.NoError(t, err)
	tweak := func(cfg *replica.Config) {
		tc, err := ca.Config(fmt.Sprintf("member-%d", cfg.ID))
		require.NoError(t, err)
		cfg.TLS = tc
	}
	c := startClusterWith(t, 3, "kafka", tweak)
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	produce(t, c.member(2), "t", 0, 50) // routed to the leaders, over TLS
	for p := range 2 {
		c.waitInSync("t", p)
		c.checkIdentical("t", p)
	}
	// A failover and a restart, over TLS.
	old := c.leader("t", 0)
	c.stop(old)
	c.waitLeaderNot(c.any(old), "t", 0, old)
	produce(t, c.any(old), "t", 50, 50)
	c.startMemberWith(old, tweak)
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)

	intruder := c.net.Node("intruder")
	other, err := controllertest.NewCA("other")
	require.NoError(t, err)
	foreign, err := other.Config("intruder")
	require.NoError(t, err)
	foreign.RootCAs = ca.Pool() // it trusts the members; they must not trust it
	admin, err := ca.Config("admin")
	require.NoError(t, err)
	cases := []struct {
		name string
		cfg  *tls.Config // nil: plain TCP
		ok   bool
	}{
		{"a certificate of the cluster's CA", admin, true},
		{"a certificate of another CA", foreign, false},
		{"TLS without a certificate", &tls.Config{RootCAs: ca.Pool()}, false},
		{"plain TCP", nil, false},
	}
	for _, tc := range cases {
		for _, port := range []string{"data plane", "raft"} {
			addr := c.peers[0].Addr
			if port == "raft" {
				addr = c.peers[0].RaftAddr
			}
			err := talk(intruder, addr, port == "raft", tc.cfg)
			if tc.ok {
				require.NoError(t, err, "%s on the %s port", tc.name, port)
			} else {
				require.Error(t, err, "%s was accepted on the %s port", tc.name, port)
			}
		}
	}
}

// talk connects to addr from node and asks for an answer: a Kafka
// ApiVersions on the data plane, the forwarding ack on the Raft port.
func talk(node *testnet.Node, addr string, raft bool, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if cfg == nil {
		conn, err = node.Dial(ctx, addr)
	} else {
		conn, err = controller.DialTLS(ctx, node.Dial, addr, cfg)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if raft {
		if _, err := conn.Write([]byte{'C'}); err != nil {
			return err
		}
		ack, err := r.ReadByte()
		if err != nil {
			return err
		}
		if ack != 'A' {
			return fmt.Errorf("ack %q", ack)
		}
		return nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := resp.ReadFrom(body[4:]); err != nil { // after the correlation id
		return err
	}
	if len(resp.ApiKeys) == 0 {
		return fmt.Errorf("ApiVersions answered no API")
	}
	return nil
}

func TestStartRejectsBadTLS(t *testing.T) {
	leaktest.Check(t)
	ca, err := controllertest.NewCA("cluster")
	require.NoError(t, err)
	_, err = replica.Start(replica.Config{
		ID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		TLS: &tls.Config{RootCAs: ca.Pool()}, // no certificate
	})
	require.ErrorIs(t, err, replica.ErrInvalidConfig)
}
