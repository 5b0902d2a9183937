package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/transport"
	"github.com/strata-log/strata/timingwheel"
)

// Broker is a cluster member: a controller voter, a log.Store of the
// partitions it holds a replica of, the leader of some of them and a
// follower of others, and a data plane (Kafka clients and replication, on
// Addr). It is a log.Client: calls are routed to each partition's leader.
type Broker struct {
	cfg   Config
	log   *slog.Logger
	store *log.Store
	ctl   *controller.Controller
	srv   *kafka.Server
	// listeners are the client listeners' servers (listeners.go), set
	// before the member registers and closed with srv.
	listeners []clientListener
	tr        transport.Transport
	ktr       *kafkaTransport // tr, when it is the Kafka-protocol one

	wheel     *timingwheel.TimingWheel
	purgatory *timingwheel.Purgatory[log.TopicPartition]
	purg      purgatorySizes // told to cfg.Metrics (metrics.go)

	brokerEpoch  atomic.Int64
	shuttingDown atomic.Bool
	// fenced is set once the controller has acknowledged the controlled
	// shutdown: the member leads nothing from then on.
	fenced atomic.Bool

	// ready is closed once the member is registered, caught up and
	// unfenced (ready.go).
	ready     chan struct{}
	readyOnce sync.Once

	img       atomic.Pointer[controller.Image]
	metaMu    sync.Mutex
	metaEvent chan struct{} // closed and replaced after each image is applied

	mu    sync.RWMutex // guards parts
	parts map[log.TopicPartition]*partState

	fetchMu  sync.Mutex
	fetchers map[int]*fetcher // by source (leader) broker

	alters *alterQueue
	// leaderQuota and followerQuota are the replication throttles
	// (throttle.go); disabled at a zero rate.
	leaderQuota, followerQuota *replicationQuota
	pids                       *log.ProducerIDAllocator // blocks from the controller (idempotence.go)

	tokens atomic.Uint64
	order  produceOrder // idempotent produces keep their order (order.go)

	groups memberGroups // the coordinators of the __consumer_offsets partitions it leads (groups.go)
	txns   memberTxns   // the coordinators of the __transaction_state partitions it leads (txn.go)
	shares memberShares // share groups: memberships and share-partitions it serves (share.go)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ log.Client = (*Broker)(nil)

// Start starts a member: it opens the data in cfg.Dir, starts its
// controller voter, binds the data plane on cfg.Addr, registers with the
// controller and follows the metadata. It returns once the member is
// ready (ready.go): registered, caught up with the metadata as of its
// registration (it knows every topic the cluster has) and unfenced, or
// after cfg.StartTimeout with ErrNotCaughtUp. When a majority of the
// voters cannot be reached at all — the first members of a cluster that
// is forming, started one by one — it returns at once instead: the quorum
// forms as the others start, and the member serves (its listeners accept,
// its calls go through) only once it is ready; Ready tells when.
func Start(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	srvTLS, cliTLS, err := cfg.dataPlaneTLS() // mutual TLS of the data plane (tls.go); nil, nil without
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:       cfg,
		log:       cfg.Logger.With("broker", cfg.ID),
		metaEvent: make(chan struct{}),
		ready:     make(chan struct{}),
		parts:     map[log.TopicPartition]*partState{},
		fetchers:  map[int]*fetcher{},
		order:     produceOrder{clock: cfg.Clock},
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.alters = newAlterQueue()
	b.leaderQuota = newReplicationQuota(cfg.LeaderReplicationThrottledRate, cfg.ReplicationQuotaWindow)
	b.followerQuota = newReplicationQuota(cfg.FollowerReplicationThrottledRate, cfg.ReplicationQuotaWindow)
	b.pids = log.NewProducerIDAllocator(controllerProducerIDs{b})
	var cleanup []func()
	fail := func(err error) (*Broker, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		b.cancel()
		return nil, err
	}

	b.wheel = timingwheel.New(time.Millisecond, 20)
	cleanup = append(cleanup, b.wheel.Stop)
	pg, err := timingwheel.NewPurgatory[log.TopicPartition](b.wheel, timingwheel.PurgatoryConfig{})
	if err != nil {
		return fail(err)
	}
	b.purgatory = pg

	store, err := log.OpenStore(filepath.Join(cfg.Dir, "data"), log.StoreConfig{
		Metrics: cfg.Metrics,
		Notify: func(p *log.Partition) {
			b.purgatory.CheckAndComplete(log.TopicPartition{Topic: p.Topic(), Partition: p.ID()})
		},
	})
	if err != nil {
		return fail(fmt.Errorf("replica: %w", err))
	}
	b.store = store
	cleanup = append(cleanup, func() { store.Close() })

	peers := make([]controller.Peer, len(cfg.Peers))
	for i, p := range cfg.Peers {
		peers[i] = controller.Peer{ID: p.ID, RaftAddr: p.RaftAddr}
	}
	ctl, err := controller.Start(controller.Config{
		NodeID: cfg.ID, Dir: filepath.Join(cfg.Dir, "controller"), RaftAddr: cfg.RaftAddr, Peers: peers,
		Logger: cfg.Logger, Network: cfg.Network, Clock: cfg.Clock, TLS: cfg.TLS,
		HeartbeatInterval: cfg.HeartbeatInterval, SessionTimeout: cfg.SessionTimeout, Raft: cfg.Raft,
		LeaderImbalanceCheckInterval: cfg.LeaderImbalanceCheckInterval, LeaderImbalancePercentage: cfg.LeaderImbalancePercentage,
	})
	if err != nil {
		return fail(fmt.Errorf("replica: %w", err))
	}
	b.ctl = ctl
	cleanup = append(cleanup, func() { ctl.Close() })
	b.img.Store(ctl.Image())
	if err := b.startShares(); err != nil { // before the servers, which use it
		return fail(err)
	}
	cleanup = append(cleanup, b.stopShares)

	if cfg.Local != nil {
		if !cfg.Local.Join((*localMember)(b)) {
			return fail(fmt.Errorf("%w: member %d is already on the local network", ErrInvalidConfig, cfg.ID))
		}
		cleanup = append(cleanup, func() { cfg.Local.Leave((*localMember)(b)) })
		b.tr = cfg.Local.Endpoint(cfg.ID)
	}

	kcfg := kafka.Config{NodeID: int32(cfg.ID), Logger: cfg.Logger, Metrics: cfg.Metrics, TransactionVersion: cfg.TransactionVersion}
	viaNetwork := false
	if b.tr == nil {
		// The data plane carries replication too: the Kafka protocol,
		// through the Network when one is given.
		dial := controller.TCPNetwork{}.Dial
		if cfg.Network != nil {
			viaNetwork = true
			dial = cfg.Network.Dial
		}
		kt := newKafkaTransport(b, tlsDial(dial, cliTLS))
		b.tr, b.ktr = kt, kt
		cleanup = append(cleanup, kt.close)
	}
	ln, err := b.listen(cfg.Addr, viaNetwork)
	if err != nil {
		return fail(fmt.Errorf("replica: listen on %s: %w", cfg.Addr, err))
	}
	kcfg.Listener = ln
	kcfg.TLS = srvTLS
	srv, err := kafka.Listen(cfg.Addr, kafkaBackend{b}, kcfg)
	if err != nil {
		ln.Close()
		return fail(fmt.Errorf("replica: %w", err))
	}
	b.srv = srv
	cleanup = append(cleanup, func() { srv.Close() })
	if err := b.startListeners(cfg.Network != nil && b.ktr != nil); err != nil {
		return fail(err)
	}

	b.wg.Add(4)
	go b.watchMetadata()
	go b.heartbeat()
	go b.tickLoop()
	go b.alterLoop()
	b.wg.Add(1)
	go b.shareLoop()
	if err := b.awaitReady(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// ID returns the member's ID.
func (b *Broker) ID() int { return b.cfg.ID }

// Addr returns the bound data-plane address (Kafka protocol).
func (b *Broker) Addr() string { return b.srv.Addr() }

// Controller returns the current active controller as this member knows it.
func (b *Broker) Controller() (id int, ok bool) {
	id, _, ok = b.ctl.Leader()
	return id, ok
}

// Image returns the cluster metadata as this member has applied it.
func (b *Broker) Image() *controller.Image { return b.img.Load() }

// WaitImage returns the metadata once this member has applied a version
// above afterVersion (see controller.Controller.Wait).
func (b *Broker) WaitImage(ctx context.Context, afterVersion uint64) (*controller.Image, error) {
	for {
		ch := b.metaWatch()
		img := b.img.Load()
		if img.Version() > afterVersion {
			return img, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.ctx.Done():
			return nil, log.ErrClosed
		}
	}
}

// Leader returns the leader of a partition as this member knows it.
func (b *Broker) Leader(topic string, partition int) (id int, ok bool) {
	l, ok := b.img.Load().Leader(topic, partition)
	if !ok || l == controller.NoLeader {
		return 0, false
	}
	return l, true
}

// Partition returns this member's replica of a partition.
func (b *Broker) Partition(topic string, partition int) (*log.Partition, error) {
	ps := b.part(log.TopicPartition{Topic: topic, Partition: partition})
	if ps == nil {
		if _, ok := b.img.Load().PartitionCount(topic); !ok {
			return nil, fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
		}
		return nil, fmt.Errorf("%w: %s-%d has no replica on broker %d", log.ErrUnknownPartition, topic, partition, b.cfg.ID)
	}
	return ps.p, nil
}

func (b *Broker) part(tp log.TopicPartition) *partState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.parts[tp]
}

// metaWatch returns a channel closed once the next image is applied.
func (b *Broker) metaWatch() <-chan struct{} {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.metaEvent
}

func (b *Broker) metaApplied() {
	b.metaMu.Lock()
	close(b.metaEvent)
	b.metaEvent = make(chan struct{})
	b.metaMu.Unlock()
}

// Close is Kafka's controlled shutdown: the member asks the controller to
// fence it, so that leadership of its partitions moves to other in-sync
// replicas and it leaves their ISRs, waits for that (a few heartbeats at
// most), then stops everything and waits for its goroutines.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.controlledShutdown()
		b.cancel()
		if b.cfg.Local != nil {
			b.cfg.Local.Leave((*localMember)(b))
		}
		b.wg.Wait()
		b.stopTxnCoordinators() // before the group coordinators its markers complete
		b.stopCoordinator()
		b.stopShares()
		b.fetchMu.Lock()
		fs := b.fetchers
		b.fetchers = map[int]*fetcher{}
		b.fetchMu.Unlock()
		for _, f := range fs {
			f.stop()
		}
		if b.ktr != nil {
			b.ktr.close()
		}
		err := b.closeListeners()
		if serr := b.srv.Close(); err == nil {
			err = serr
		}
		b.failAllWaiting()
		if cerr := b.ctl.Close(); err == nil {
			err = cerr
		}
		b.wheel.Stop()
		if serr := b.store.Close(); err == nil {
			err = serr
		}
		b.closeErr = err
	})
	return b.closeErr
}

// controlledShutdown heartbeats WantFence: the controller fences the
// member, which moves the leadership of its partitions to other in-sync
// replicas and takes it out of their ISRs, and answers once that is
// committed. From then on the member appends nothing as a leader (its
// produces answer ErrNotLeader), though its own metadata may not show the
// change yet. It gives up after controlledShutdownTimeout (no quorum: the
// last member of a cluster to stop), and at once when it never registered.
func (b *Broker) controlledShutdown() {
	b.shuttingDown.Store(true)
	epoch := b.brokerEpoch.Load()
	if epoch == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.controlledShutdownTimeout())
	defer cancel()
	start := time.Now()
	resp, err := b.ctl.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: b.cfg.ID, BrokerEpoch: epoch, WantFence: true})
	if err != nil {
		b.log.Info("replica: controlled shutdown: not acknowledged, stopping anyway", "err", err, "after", time.Since(start).Round(time.Millisecond))
		return
	}
	if resp.Fenced {
		b.fenced.Store(true)
	}
	b.log.Debug("replica: controlled shutdown acknowledged", "after", time.Since(start).Round(time.Millisecond))
}

// controlledShutdownTimeout bounds the controlled shutdown: two heartbeat
// intervals, at least 500 ms and at most 1 s, so that a member stops
// within about 2 s even when no controller answers.
func (b *Broker) controlledShutdownTimeout() time.Duration {
	return min(max(2*b.cfg.HeartbeatInterval, 500*time.Millisecond), time.Second)
}

// heartbeat registers the member and heartbeats until Close. Until the
// member has applied the metadata up to the version its registration
// committed at, its heartbeats ask to stay fenced (KRaft's broker
// startup); the first one after asks to be unfenced, and its answer makes
// the member ready.
func (b *Broker) heartbeat() {
	defer b.wg.Done()
	interval := b.ctl.HeartbeatInterval()
	var epoch int64
	var caughtUpAt uint64
	for b.ctx.Err() == nil {
		if epoch == 0 {
			ctx, cancel := context.WithTimeout(b.ctx, 5*interval)
			r, err := b.ctl.Register(ctx, controller.BrokerRegistration{ID: b.cfg.ID, Addr: b.Addr(), Listeners: b.endpoints()})
			cancel()
			if err != nil {
				b.log.Debug("replica: register", "err", err)
				if !b.sleep(interval / 4) {
					return
				}
				continue
			}
			epoch, caughtUpAt = r.Epoch, r.Version
			b.brokerEpoch.Store(epoch)
		}
		if b.shuttingDown.Load() {
			return
		}
		applied := b.metaWatch()
		caughtUp := b.img.Load().Version() >= caughtUpAt
		ctx, cancel := context.WithTimeout(b.ctx, 2*interval)
		resp, err := b.ctl.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: b.cfg.ID, BrokerEpoch: epoch, WantFence: !caughtUp})
		cancel()
		switch {
		case errors.Is(err, controller.ErrStaleBrokerEpoch), errors.Is(err, controller.ErrUnknownBroker):
			epoch = 0
			continue
		case err != nil:
			b.log.Debug("replica: heartbeat", "err", err)
		case caughtUp && !resp.Fenced:
			b.markReady()
		}
		if !caughtUp {
			// Heartbeat again as soon as the next metadata is applied.
			t := b.cfg.Clock.NewTimer(interval)
			select {
			case <-applied:
			case <-t.C():
			case <-b.ctx.Done():
			}
			t.Stop()
			continue
		}
		if !b.sleep(interval) {
			return
		}
	}
}

// sleep waits d or until Close; false when closing.
func (b *Broker) sleep(d time.Duration) bool {
	t := b.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-b.ctx.Done():
		return false
	}
}

// tickLoop steps every partition this member leads with a Tick, every
// ReplicaLagTime/4: one timer for all partitions.
func (b *Broker) tickLoop() {
	defer b.wg.Done()
	every := b.cfg.ReplicaLagTime / 4
	for b.sleep(every) {
		b.mu.RLock()
		parts := make([]*partState, 0, len(b.parts))
		for _, ps := range b.parts {
			parts = append(parts, ps)
		}
		b.mu.RUnlock()
		for _, ps := range parts {
			ps.mu.Lock()
			if ps.pm.Leading() {
				b.runLeader(ps, ps.pm.Step(b.cfg.Clock.Now(), machine.Tick{}, nil))
			}
			ps.mu.Unlock()
		}
	}
}
