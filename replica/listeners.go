package replica

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// Client listeners (Kafka's listeners=CLIENT://...,INTERNAL://... with
// inter.broker.listener.name=INTERNAL). Config.Addr is the inter-broker
// listener: replication, forwarded calls and, with Config.TLS, only
// holders of a certificate of the cluster's CA. Each Listener is one more
// Kafka-protocol server of the member, for clients, with its own TLS and
// SASL. A member registers each listener's advertised address with the
// controller (controller.BrokerRegistration.Listeners), and Metadata,
// FindCoordinator and DescribeCluster answered on a listener give every
// live broker's address on that listener, leaving out the brokers that
// have none of that name, as Kafka does. Without listeners, clients use
// Addr, as before.

// Listener is one client listener of a member.
type Listener struct {
	// Name identifies the listener across the cluster: a client on the
	// listener called N is given every broker's address on its listener N.
	// Letters, digits, '_' and '-'; "" → DefaultListenerName.
	Name string
	// Addr is the host:port to listen on; port 0 picks one
	// (Broker.ListenerAddr says which).
	Addr string
	// AdvertisedAddr is the host:port clients are given for this member on
	// this listener; "" → the bound address. Set it when Addr is a
	// wildcard (0.0.0.0:9094) or behind NAT.
	AdvertisedAddr string
	// TLS, when set, makes every connection TLS: a server certificate
	// (Certificates or GetCertificate), and client certificates only if
	// ClientAuth asks for them, of whatever CA ClientCAs holds. It is
	// independent of Config.TLS.
	TLS *tls.Config
	// SASL, when set, makes every connection authenticate (PLAIN, SCRAM)
	// before anything but ApiVersions and the SASL requests.
	SASL *kafka.SASLConfig
}

// DefaultListenerName is the name of a Listener given none.
const DefaultListenerName = "CLIENT"

// withListenerDefaults fills the listeners' defaults, on a copy.
func (c Config) withListenerDefaults() Config {
	ls := make([]Listener, len(c.Listeners))
	for i, l := range c.Listeners {
		if l.Name == "" {
			l.Name = DefaultListenerName
		}
		ls[i] = l
	}
	if len(ls) == 0 {
		ls = nil
	}
	c.Listeners = ls
	return c
}

func (c Config) validateListeners() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: replica: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for i, l := range c.Listeners {
		if !validListenerName(l.Name) {
			return bad("listener %d: name %q: want letters, digits, '_' or '-'", i, l.Name)
		}
		key := strings.ToUpper(l.Name) // Kafka's listener names ignore case
		if seen[key] {
			return bad("two listeners named %q", l.Name)
		}
		seen[key] = true
		if _, _, err := net.SplitHostPort(l.Addr); err != nil {
			return bad("listener %s: Addr %q: %v", l.Name, l.Addr, err)
		}
		if l.AdvertisedAddr != "" {
			_, port, err := net.SplitHostPort(l.AdvertisedAddr)
			if n, perr := strconv.Atoi(port); err != nil || perr != nil || n <= 0 || n > 65535 {
				return bad("listener %s: AdvertisedAddr %q: want host:port with a port", l.Name, l.AdvertisedAddr)
			}
		}
		if l.TLS != nil && len(l.TLS.Certificates) == 0 && l.TLS.GetCertificate == nil && l.TLS.GetConfigForClient == nil {
			return bad("listener %s: TLS without a server certificate", l.Name)
		}
		if s := l.SASL; s != nil && s.Plain == nil && s.SCRAM256 == nil && s.SCRAM512 == nil {
			return bad("listener %s: SASL without a mechanism", l.Name)
		}
	}
	return nil
}

func validListenerName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// clientListener is a running Listener: its server and what the member
// registers for it.
type clientListener struct {
	name       string
	srv        *kafka.Server
	advertised string
}

// startListeners starts a Kafka-protocol server per client listener,
// through the Network when the data plane on Addr goes through it.
// On error, the ones started are closed.
func (b *Broker) startListeners(viaNetwork bool) error {
	for _, l := range b.cfg.Listeners {
		kcfg := kafka.Config{
			NodeID: int32(b.cfg.ID), Logger: b.cfg.Logger, Metrics: b.cfg.Metrics,
			AdvertisedAddr: l.AdvertisedAddr, TLS: l.TLS, SASL: l.SASL,
			TransactionVersion: b.cfg.TransactionVersion,
		}
		kcfg.Authorizer = b.cfg.Authorizer // security.go
		ln, err := b.listen(l.Addr, viaNetwork)
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("replica: listener %s: listen on %s: %w", l.Name, l.Addr, err)
		}
		kcfg.Listener = ln
		srv, err := kafka.Listen(l.Addr, &listenerBackend{kafkaBackend: kafkaBackend{b}, name: l.Name}, kcfg)
		if err != nil {
			ln.Close()
			b.closeListeners()
			return fmt.Errorf("replica: listener %s: %w", l.Name, err)
		}
		adv := l.AdvertisedAddr
		if adv == "" {
			adv = srv.Addr()
		}
		b.listeners = append(b.listeners, clientListener{name: l.Name, srv: srv, advertised: adv})
	}
	return nil
}

// closeListeners closes every client listener's server (its connections
// and goroutines); the first error.
func (b *Broker) closeListeners() error {
	var err error
	for _, l := range b.listeners {
		if cerr := l.srv.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// endpoints are the client listeners as the member registers them; nil
// without any (the registration then has the old layout).
func (b *Broker) endpoints() []controller.Endpoint {
	var out []controller.Endpoint
	for _, l := range b.listeners {
		out = append(out, controller.Endpoint{Name: l.name, Addr: l.advertised})
	}
	return out
}

// ListenerAddr returns the bound address of the client listener called
// name; false when the member has none of that name.
func (b *Broker) ListenerAddr(name string) (string, bool) {
	for _, l := range b.listeners {
		if l.name == name {
			return l.srv.Addr(), true
		}
	}
	return "", false
}

// brokersOn returns the live brokers (and this one) with their address on
// the listener called name, "" for the inter-broker one (Addr); a broker
// without that listener is left out.
func (b *Broker) brokersOn(name string) []kafka.ClusterBroker {
	var out []kafka.ClusterBroker
	for _, bi := range b.img.Load().Brokers() {
		if bi.Fenced && bi.ID != b.cfg.ID {
			continue
		}
		addr := bi.Addr
		if name != "" {
			var ok bool
			if addr, ok = bi.Listener(name); !ok {
				continue
			}
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		p, _ := strconv.Atoi(port)
		out = append(out, kafka.ClusterBroker{ID: int32(bi.ID), Host: host, Port: int32(p)})
	}
	return out
}

// listenerBackend is the member as the server of one client listener
// sees it: every call is the member's, but the brokers it lists are their
// addresses on that listener, and followers' fetches are refused there
// (replication is the inter-broker listener's).
type listenerBackend struct {
	kafkaBackend
	name string
}

// ClusterBrokers returns the live brokers with their addresses on this
// listener (kafka.ClusterBackend): what Metadata, FindCoordinator and
// DescribeCluster give clients of this listener.
func (l *listenerBackend) ClusterBrokers() []kafka.ClusterBroker { return l.brokersOn(l.name) }

// codeTopicAuthorizationFailed is Kafka's TOPIC_AUTHORIZATION_FAILED, its
// answer to a follower's fetch from a principal without ClusterAction.
const codeTopicAuthorizationFailed int16 = 29

// FetchReplica refuses a Fetch with a replica id on a client listener:
// only members replicate, on the inter-broker listener. Every partition
// is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers a follower
// fetch it does not authorize, and nothing reaches the partitions.
func (l *listenerBackend) FetchReplica(_ context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	return refuseReplicaFetch(req), nil
}

// FetchReplicaBatches is FetchReplica (kafka.ReplicaBatchesBackend).
func (l *listenerBackend) FetchReplicaBatches(_ context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, []log.Batches, error) {
	return refuseReplicaFetch(req), nil, nil
}

func refuseReplicaFetch(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeTopicAuthorizationFailed
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// LiveBrokers counts the cluster's live members, with this listener or not
// (kafka.ListenerBackend).
func (l *listenerBackend) LiveBrokers() int { return len(l.brokersOn("")) }

// LeaderOffListener reports whether a partition's leader is a live member
// without this listener (kafka.ListenerBackend: LISTENER_NOT_FOUND).
func (l *listenerBackend) LeaderOffListener(topic string, partition int) bool {
	leader, _, _, _, ok := l.kafkaBackend.PartitionState(topic, partition)
	if !ok || leader < 0 {
		return false
	}
	bi, ok := l.img.Load().Broker(int(leader))
	if !ok {
		return false
	}
	_, on := bi.Listener(l.name)
	return !on
}

// PartitionState is the member's (kafka.ClusterBackend), but as clients
// of this listener may use it: a leader without this listener is no
// leader (-1: LISTENER_NOT_FOUND to Metadata v6+, LEADER_NOT_AVAILABLE
// before, both retried; LeaderOffListener), and replicas and ISR list
// only brokers with it, as Kafka's Metadata filters them by the
// request's listener.
func (l *listenerBackend) PartitionState(topic string, partition int) (leader, leaderEpoch int32, replicas, isr []int32, ok bool) {
	leader, leaderEpoch, replicas, isr, ok = l.kafkaBackend.PartitionState(topic, partition)
	if !ok {
		return leader, leaderEpoch, replicas, isr, ok
	}
	img := l.img.Load()
	on := func(id int32) bool {
		bi, ok := img.Broker(int(id))
		if !ok {
			return false
		}
		_, ok = bi.Listener(l.name)
		return ok
	}
	if leader >= 0 && !on(leader) {
		leader = -1
	}
	keep := func(ids []int32) []int32 {
		out := ids[:0]
		for _, id := range ids {
			if on(id) {
				out = append(out, id)
			}
		}
		return out
	}
	return leader, leaderEpoch, keep(replicas), keep(isr), true
}
