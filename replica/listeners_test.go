package replica_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/controller/controllertest"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/testnet"
)

// scramUsers is a SASL config of SCRAM-SHA-256 users and their passwords.
func scramUsers(t *testing.T, users map[string]string) *kafka.SASLConfig {
	t.Helper()
	creds := map[string]kafka.SCRAMCredential{}
	for u, p := range users {
		c, err := kafka.NewSCRAMCredential("SCRAM-SHA-256", p, 4096)
		require.NoError(t, err)
		creds[u] = c
	}
	return &kafka.SASLConfig{SCRAM256: func(u string) (kafka.SCRAMCredential, bool) {
		c, ok := creds[u]
		return c, ok
	}}
}

// brokersListed returns what Metadata and DescribeCluster answered on the
// client's connection: node id → host:port (the two must agree).
func brokersListed(t *testing.T, ctx context.Context, kc *kafka.Client) map[int32]string {
	t.Helper()
	resp, err := kc.Request(ctx, kmsg.NewPtrMetadataRequest(), 12)
	require.NoError(t, err)
	out := map[int32]string{}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	dresp, err := kc.Request(ctx, kmsg.NewPtrDescribeClusterRequest(), 1)
	require.NoError(t, err)
	described := map[int32]string{}
	for _, b := range dresp.(*kmsg.DescribeClusterResponse).Brokers {
		described[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	require.Equal(t, out, described, "Metadata and DescribeCluster")
	return out
}

// The brokers a client of the CLIENT listener should be given: every
// running member's address on it.
func clientAddrs(c *memberCluster) map[int32]string {
	out := map[int32]string{}
	for _, b := range c.members {
		if b != nil {
			addr, _ := b.ListenerAddr("CLIENT")
			out[int32(b.ID())] = addr
		}
	}
	return out
}

// A 3-member cluster with mutual TLS between members (Addr, Raft) and a
// client listener with TLS (a server certificate of another CA) and
// SASL/SCRAM: a Kafka client holding only that CA and a password is given
// the members' client-listener addresses and nothing else, produces with
// acks=all and consumes in a group across the stop of a leader that is
// also the group's coordinator; the same client is refused on Addr, a
// wrong password and plain TCP are refused on the listener, a follower's
// fetch there is refused, and garbage does not bring the member down.
func TestClientListenerTLSAndSCRAM(t *testing.T) {
	leaktest.Check(t)
	clusterCA, err := controllertest.NewCA("cluster")
	require.NoError(t, err)
	clientCA, err := controllertest.NewCA("clients")
	require.NoError(t, err)
	users := scramUsers(t, map[string]string{"alice": "s3cret"})
	listenAt := map[int]string{} // stable across restarts
	tweak := func(cfg *replica.Config) {
		tc, err := clusterCA.Config(fmt.Sprintf("member-%d", cfg.ID))
		require.NoError(t, err)
		cfg.TLS = tc
		if listenAt[cfg.ID] == "" {
			listenAt[cfg.ID], err = cfg.Network.(*testnet.Node).Reserve()
			require.NoError(t, err)
		}
		cert, err := clientCA.Issue(fmt.Sprintf("member-%d", cfg.ID))
		require.NoError(t, err)
		cfg.Listeners = []replica.Listener{{
			Name: "CLIENT", Addr: listenAt[cfg.ID],
			TLS:  &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			SASL: users,
		}}
	}
	c := startClusterWith(t, 3, "kafka", tweak)
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createOffsetsTopic(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Every member registered its listener.
	c.waitImage(c.member(1), "every listener registered", func(img *controller.Image) bool {
		for _, bi := range img.Brokers() {
			if _, ok := bi.Listener("CLIENT"); !ok {
				return false
			}
		}
		return len(img.Brokers()) == 3
	})

	clientNode := c.net.Node("client")
	dialCfg := func(seeds []string, password string) kafka.DialConfig {
		return kafka.DialConfig{
			Seeds: seeds, Dial: clientNode.Dial,
			TLS:  &tls.Config{RootCAs: clientCA.Pool(), MinVersion: tls.VersionTLS12},
			SASL: &kafka.DialSASL{Mechanism: "SCRAM-SHA-256", User: "alice", Password: password},
		}
	}
	var seeds []string
	for id := 1; id <= 3; id++ {
		seeds = append(seeds, listenAt[id])
	}
	kc, err := kafka.Dial(ctx, dialCfg(seeds, "s3cret"))
	require.NoError(t, err)
	defer kc.Close()

	// Metadata on the client listener: the client-listener addresses only.
	listed := brokersListed(t, ctx, kc)
	require.Equal(t, clientAddrs(c), listed)
	for _, addr := range listed {
		for _, p := range c.peers {
			require.NotEqual(t, p.Addr, addr, "member %d's inter-broker address given to a client", p.ID)
		}
	}

	// The refusals.
	t.Run("refused", func(t *testing.T) {
		_, err := kafka.Dial(ctx, dialCfg([]string{listenAt[1]}, "wrong"))
		var ke *kafka.Error
		require.ErrorAs(t, err, &ke, "a wrong password")
		require.EqualValues(t, 58, ke.Code, "SASL_AUTHENTICATION_FAILED")

		_, err = kafka.Dial(ctx, dialCfg([]string{c.peers[0].Addr}, "s3cret"))
		require.Error(t, err, "the client on the inter-broker Addr, without a cluster certificate")

		plain := dialCfg([]string{listenAt[1]}, "s3cret")
		plain.TLS = nil
		short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
		defer cancelShort()
		_, err = kafka.Dial(short, plain)
		require.Error(t, err, "plain TCP on the TLS listener")

		noSASL := dialCfg([]string{listenAt[1]}, "")
		noSASL.SASL = nil
		nc, err := kafka.Dial(ctx, noSASL) // ApiVersions is allowed, Metadata is not
		if err == nil {
			_, err = nc.Partitions(context.Background(), "t")
			nc.Close()
		}
		require.Error(t, err, "no SASL")
	})

	// A follower's fetch on the client listener is refused, partition by
	// partition, and moves nothing.
	leader := c.leader("t", 0)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = int32(leader%3+1), 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 1<<40, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	leaderConn, err := kafka.Dial(ctx, dialCfg([]string{listenAt[leader]}, "s3cret"))
	require.NoError(t, err)
	fr, err := leaderConn.Request(ctx, fetch, 12)
	require.NoError(t, err)
	leaderConn.Close()
	parts := fr.(*kmsg.FetchResponse).Topics[0].Partitions
	require.Len(t, parts, 1)
	require.EqualValues(t, 29, parts[0].ErrorCode, "TOPIC_AUTHORIZATION_FAILED")
	require.Empty(t, parts[0].RecordBatches)

	// Garbage on the client listener: not TLS at all, and a TLS
	// connection that sends a frame of nonsense. The member closes both
	// and serves on.
	garbage := c.net.Node("garbage")
	raw, err := garbage.Dial(ctx, listenAt[1])
	require.NoError(t, err)
	_, _ = raw.Write(bytes.Repeat([]byte{0xff, 0x00, 0x13}, 4096))
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.Copy(io.Discard, raw)
	require.False(t, isTimeout(err), "the member did not close a connection of garbage: %v", err)
	raw.Close()
	tc, err := controller.DialTLS(ctx, garbage.Dial, listenAt[1], &tls.Config{RootCAs: clientCA.Pool(), ServerName: "127.0.0.1"})
	require.NoError(t, err)
	_, _ = tc.Write([]byte{0x00, 0x00, 0x00, 0x10, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	require.NoError(t, tc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.Copy(io.Discard, tc)
	require.False(t, isTimeout(err), "the member did not close a TLS connection of garbage: %v", err)
	tc.Close()
	require.Equal(t, clientAddrs(c), brokersListed(t, ctx, kc), "after the garbage")

	// Produce (acks=all, idempotent) and consume in a group whose
	// coordinator is the leader of t-0, then stop that member.
	g := groupsOn(t, c)[leader]
	require.NotEmpty(t, g, "member %d leads no partition of %s", leader, log.OffsetsTopic)
	// FindCoordinator on the listener: the coordinator's address on it.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = g
	fresp, err := kc.Request(ctx, fc, 3)
	require.NoError(t, err)
	coord := fresp.(*kmsg.FindCoordinatorResponse)
	require.EqualValues(t, 0, coord.ErrorCode)
	require.EqualValues(t, leader, coord.NodeID)
	require.Equal(t, clientAddrs(c)[int32(leader)], net.JoinHostPort(coord.Host, fmt.Sprint(coord.Port)))

	const total = 120
	vals := values(total)
	prod, err := log.NewProducer(kc, log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 30 * time.Second})
	require.NoError(t, err)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 3, Value: []byte(vals[i])})
			require.NoError(t, err, "record %d", i)
		}
	}
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{
		Group: g, Topics: []string{"t"}, MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second,
	})
	require.NoError(t, err)
	defer cons.Close()
	seen := map[string]bool{}
	consumeUntil := func(n int) {
		t.Helper()
		for len(seen) < n {
			recs, err := cons.Poll(ctx)
			require.NoError(t, err)
			for _, r := range recs {
				seen[string(r.Value)] = true
			}
		}
	}
	send(0, total/2)
	consumeUntil(total / 2)
	require.NoError(t, cons.Commit(ctx))

	c.stop(leader)
	c.waitLeaderNot(c.any(leader), "t", 0, leader)
	send(total/2, total)
	require.NoError(t, prod.Close())
	consumeUntil(total)
	for _, v := range vals {
		require.True(t, seen[v], "%s not consumed", v)
	}
	// Each record stored once (idempotence across the failover), replicas
	// identical.
	var stored []string
	for p := range 3 {
		c.waitReplicasInSync("t", p)
		c.checkReplicasIdentical("t", p)
		stored = append(stored, valuesOf(t, c.any(leader), "t", p)...)
	}
	sort.Strings(stored)
	want := slices.Clone(vals)
	sort.Strings(want)
	require.Equal(t, want, stored)
	// Metadata now lists the two left, on their client listeners, once
	// they know the stopped one fenced.
	for _, b := range c.members {
		if b != nil {
			c.waitImage(b, fmt.Sprintf("member %d fenced", leader), func(img *controller.Image) bool {
				bi, ok := img.Broker(leader)
				return ok && bi.Fenced
			})
		}
	}
	listed = brokersListed(t, ctx, kc)
	require.Len(t, listed, 2)
	require.Equal(t, clientAddrs(c), listed)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A broker without the listener a request arrived on is left out of that
// listener's Metadata (and is no leader there), while the inter-broker
// listener lists every member; a member without listeners registers none
// and serves clients on Addr as before.
func TestListenerLeavesOutBrokersWithoutIt(t *testing.T) {
	leaktest.Check(t)
	tweak := func(cfg *replica.Config) {
		if cfg.ID != 3 {
			cfg.Listeners = []replica.Listener{{Addr: "127.0.0.1:0"}} // named DefaultListenerName
		}
	}
	c := startClusterWith(t, 3, "local", tweak)
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	img := c.waitImage(c.member(1), "the listeners registered", func(img *controller.Image) bool {
		n := 0
		for _, bi := range img.Brokers() {
			if _, ok := bi.Listener(replica.DefaultListenerName); ok {
				n++
			}
		}
		return n == 2
	})
	bi, _ := img.Broker(3)
	require.Nil(t, bi.Listeners, "a member without listeners")
	_, ok := c.member(3).ListenerAddr(replica.DefaultListenerName)
	require.False(t, ok)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	onListener, _ := c.member(1).ListenerAddr(replica.DefaultListenerName)
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{onListener}})
	require.NoError(t, err)
	defer kc.Close()
	want := clientAddrs(c)
	delete(want, 3)
	require.Equal(t, want, brokersListed(t, ctx, kc))

	// Partitions led by member 3 have no leader on this listener, and 3 is
	// in no replica list there.
	resp, err := kc.Request(ctx, &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}}, 12)
	require.NoError(t, err)
	mt := resp.(*kmsg.MetadataResponse).Topics
	require.Len(t, mt, 1)
	// As Kafka: LISTENER_NOT_FOUND (72) to Metadata v6+, LEADER_NOT_AVAILABLE
	// (5) before.
	resp5, err := kc.Request(ctx, &kmsg.MetadataRequest{Version: 5, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}}, 5)
	require.NoError(t, err)
	mt5 := resp5.(*kmsg.MetadataResponse).Topics
	require.Len(t, mt5, 1)
	off := 0
	for i, p := range mt[0].Partitions {
		real := c.leader("t", int(p.Partition))
		if real == 3 {
			off++
			require.EqualValues(t, -1, p.Leader, "t-%d", p.Partition)
			require.EqualValues(t, 72, p.ErrorCode, "t-%d: LISTENER_NOT_FOUND", p.Partition)
			require.EqualValues(t, 5, mt5[0].Partitions[i].ErrorCode, "t-%d v5: LEADER_NOT_AVAILABLE", p.Partition)
		} else {
			require.EqualValues(t, real, p.Leader, "t-%d", p.Partition)
			require.Zero(t, p.ErrorCode, "t-%d", p.Partition)
		}
		require.NotContains(t, p.Replicas, int32(3))
		require.NotContains(t, p.ISR, int32(3))
	}
	require.Positive(t, off, "member 3 leads one of the 3 partitions (one each)")

	// CreateTopics on this listener checks the replication factor against
	// every live member, with the listener or not (Kafka's controller).
	createRF := func(topic string, rf int16) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, rf
		req.Topics = append(req.Topics, rt)
		resp, err := kc.Request(ctx, req, 7)
		require.NoError(t, err)
		return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	require.Zero(t, createRF("rf3", 3), "3 live members, 2 with the listener")
	require.EqualValues(t, 38, createRF("rf4", 4), "INVALID_REPLICATION_FACTOR: 3 live members")

	// On the inter-broker listener (Addr): every member, at its Addr.
	kc2, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.member(3).Addr()}})
	require.NoError(t, err)
	defer kc2.Close()
	all := map[int32]string{}
	for _, b := range c.members {
		all[int32(b.ID())] = b.Addr()
	}
	require.Equal(t, all, brokersListed(t, ctx, kc2))
	prod, err := log.NewProducer(kc2, log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second})
	require.NoError(t, err)
	for i := range 30 {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 3, Value: []byte(values(30)[i])})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
}

func TestStartRejectsBadListeners(t *testing.T) {
	leaktest.Check(t)
	base := func() replica.Config {
		return replica.Config{ID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"}
	}
	cases := map[string][]replica.Listener{
		"bad name":              {{Name: "CLIENT://", Addr: "127.0.0.1:0"}},
		"two of one name":       {{Name: "a", Addr: "127.0.0.1:0"}, {Name: "A", Addr: "127.0.0.1:0"}},
		"two unnamed":           {{Addr: "127.0.0.1:0"}, {Addr: "127.0.0.1:0"}},
		"no address":            {{Name: "CLIENT"}},
		"advertised, no port":   {{Name: "CLIENT", Addr: "127.0.0.1:0", AdvertisedAddr: "example.com"}},
		"advertised, port 0":    {{Name: "CLIENT", Addr: "127.0.0.1:0", AdvertisedAddr: "example.com:0"}},
		"TLS without a cert":    {{Name: "CLIENT", Addr: "127.0.0.1:0", TLS: &tls.Config{}}},
		"SASL without a method": {{Name: "CLIENT", Addr: "127.0.0.1:0", SASL: &kafka.SASLConfig{}}},
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := base()
		cfg.Listeners = cases[name]
		b, err := replica.Start(cfg)
		require.ErrorIs(t, err, replica.ErrInvalidConfig, name)
		require.Nil(t, b)
	}
	// A listener that cannot bind: Start fails and leaves nothing running
	// (leaktest), the port still taken by its holder.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	cfg := base()
	cfg.Listeners = []replica.Listener{{Addr: held.Addr().String()}}
	_, err = replica.Start(cfg)
	require.Error(t, err)
}
