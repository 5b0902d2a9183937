package controller_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/controller/controllertest"
	"github.com/strata-log/strata/internal/leaktest"
)

func newCA(t testing.TB, name string) *controllertest.CA {
	t.Helper()
	ca, err := controllertest.NewCA(name)
	require.NoError(t, err)
	return ca
}

func memberTLS(t testing.TB, ca *controllertest.CA, name string) *tls.Config {
	t.Helper()
	cfg, err := ca.Config(name)
	require.NoError(t, err)
	return cfg
}

// A quorum forms over mutual TLS and forwards requests; the port refuses
// a peer without a certificate, or with one of another CA, and takes one
// with a certificate of the cluster's CA.
func TestMutualTLSQuorum(t *testing.T) {
	ctx := testContext(t)
	ca := newCA(t, "cluster")
	c := newCluster(t, 3, func(i int, cfg *controller.Config) {
		cfg.TLS = memberTLS(t, ca, fmt.Sprintf("member-%d", i+1))
	})
	lead := c.leader(ctx, c.nodes[0])
	var follower *controller.Controller
	for _, m := range c.nodes {
		if m.ID() != lead {
			follower = m
		}
	}
	liveBrokers(ctx, t, follower, 1, 2, 3) // forwarded to the leader, over TLS
	topic := createTopic(ctx, t, follower, "t", controller.TopicSpec{Partitions: 3, ReplicationFactor: 3})
	for _, img := range c.converge(ctx, c.version()) {
		got, ok := img.Topic("t")
		require.True(t, ok)
		require.Equal(t, topic, got)
	}

	addr := follower.Addr()
	intruder := c.net.Endpoint("intruder")
	dialTLS := func(cfg *tls.Config) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := controller.DialTLS(ctx, intruder.Dial, addr, cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: the server checks the client's certificate after the
		// client's handshake is done; its verdict comes with the first read.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte{'C'}); err != nil { // a forwarding stream
			return err
		}
		var ack [1]byte
		if _, err := conn.Read(ack[:]); err != nil {
			return err
		}
		if ack[0] != 'A' {
			return fmt.Errorf("ack %q", ack[0])
		}
		return nil
	}

	// The control: a certificate of the cluster's CA gets the ack.
	require.NoError(t, dialTLS(memberTLS(t, ca, "admin")))

	// Another CA's certificate (trusting the cluster's CA, so the server's
	// certificate checks out): refused.
	other := newCA(t, "other")
	foreign := memberTLS(t, other, "intruder")
	foreign.RootCAs = ca.Pool()
	require.Error(t, dialTLS(foreign), "a certificate of another CA was accepted")
	// No certificate: refused.
	require.Error(t, dialTLS(&tls.Config{RootCAs: ca.Pool()}), "a client without a certificate was accepted")
	// A client that trusts another CA refuses the member.
	require.Error(t, dialTLS(memberTLS(t, other, "lost")))

	// Plain TCP: no Raft, no ack.
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := intruder.Dial(ctx2, addr)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = conn.Write([]byte("R\x00\x00\x00\x10not a tls hello"))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf) // at most a TLS alert, then the end
	require.False(t, n > 0 && buf[0] == 'A', "a plain connection got the ack")

	// The metadata went on untouched.
	require.Equal(t, c.version(), c.converge(ctx, c.version())[0].Version())
}

func TestStartRejectsBadTLSConfig(t *testing.T) {
	leaktest.Check(t)
	ca := newCA(t, "cluster")
	good := memberTLS(t, ca, "m")
	noCA := good.Clone()
	noCA.RootCAs = nil
	for name, cfg := range map[string]*tls.Config{
		"no certificate": {RootCAs: ca.Pool()},
		"no CA":          noCA,
	} {
		_, err := controller.Start(controller.Config{NodeID: 1, Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", TLS: cfg})
		require.ErrorIs(t, err, controller.ErrInvalidConfig, name)
	}
}
