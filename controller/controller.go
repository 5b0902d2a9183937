package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Controller is one member of the controller quorum. The member that is
// the Raft leader is the active controller: it makes the decisions and runs
// broker sessions. Every member applies the committed metadata and answers
// Image and Wait; requests sent to any member reach the active controller.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm
	raft  *raft.Raft
	trans *guardedTransport
	store *raftboltdb.BoltStore
	mux   *mux
	obs   *raft.Observer
	obsCh chan raft.Observation

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: the event loop ends
	ready  chan struct{} // closed once raft is set (or the start failed)
	// loopEnded is closed by Close once the event loop has returned: the
	// completer then drains the proposals and ends.
	loopEnded chan struct{}
	reqs      chan *request
	// proposals carries the loop's proposals to the completer, in log order.
	proposals chan proposal
	failed    chan struct{} // completer → loop: a proposal failed, rebuild
	settled   chan struct{} // completer → loop: a proposal was answered
	inflight  atomic.Int64  // proposals not yet answered

	// lastLeader is the last other member seen as the leader (0: none):
	// its broker's session is counted from Raft's last contact with it
	// when this member takes over (becomeLeader).
	lastLeader atomic.Int64

	// voter: cfg.NodeID is in cfg.Peers. A broker only (membership.go)
	// asks hint, else the voters in turn (nextVoter), while it knows no
	// active controller.
	voter     bool
	hint      atomic.Pointer[Peer]
	nextVoter atomic.Uint64
	// voterChange makes the voter changes one at a time (quorum.go).
	voterChange sync.Mutex

	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced on every leader observation

	loopDone      sync.WaitGroup // the event loop and the observer
	completerDone sync.WaitGroup
	closeOnce     sync.Once
	closeErr      error
}

// Start starts a member: it opens (or creates) the Raft state in cfg.Dir,
// bootstraps the quorum from cfg.Peers if the state is new, and listens on
// cfg.RaftAddr. It returns once the member runs; a leader is elected in the
// background (Leader, or any request, waits for it).
func Start(cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		n, err := TLSNetwork(cfg.Network, cfg.TLS)
		if err != nil {
			return nil, err
		}
		cfg.Network = n
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c := &Controller{
		cfg:           cfg,
		log:           cfg.Logger.With("node", cfg.NodeID),
		stop:          make(chan struct{}),
		loopEnded:     make(chan struct{}),
		reqs:          make(chan *request),
		proposals:     make(chan proposal, 1024),
		failed:        make(chan struct{}, 1),
		settled:       make(chan struct{}, 1),
		leaderChanged: make(chan struct{}),
		voter:         cfg.isVoter(cfg.NodeID),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.fsm = newFSM(c.log)
	if err := c.open(); err != nil {
		c.cancel()
		return nil, err
	}
	c.loopDone.Add(2)
	go c.run()
	go c.observe()
	if !c.voter {
		c.loopDone.Add(1)
		go c.join()
	}
	c.completerDone.Add(1)
	go c.complete()
	return c, nil
}

// open builds the Raft node; on failure it releases what it opened.
func (c *Controller) open() (err error) {
	cfg := c.cfg
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	// The bbolt timeout makes a second Start on the same Dir fail rather
	// than block forever on the file lock.
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.Dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("controller: open raft store in %s: %w", cfg.Dir, err)
	}
	c.store = store
	cleanup = append(cleanup, func() { store.Close() })
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	hlog := newHCLog(c.log, "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("controller: open snapshots in %s: %w", cfg.Dir, err)
	}

	ln, err := cfg.Network.Listen(cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("controller: listen on %s: %w", cfg.RaftAddr, err)
	}
	// Forwarded requests wait for c.raft (set below) before they are read.
	c.ready = make(chan struct{})
	markReady := sync.OnceFunc(func() { close(c.ready) })
	c.mux = newMux(ln, cfg.Network, c.log, c.serveRPC)
	cleanup = append(cleanup, c.mux.close, markReady) // markReady first: a failed start lets them end
	addr := cfg.RaftAddr
	switch {
	case !c.voter:
		addr = ln.Addr().String() // a broker may listen on port 0: it joins with the bound address
		c.cfg.RaftAddr = addr
	case len(cfg.Peers) == 1:
		addr = ln.Addr().String() // a single member may listen on port 0
		c.cfg.Peers = []Peer{{ID: cfg.NodeID, RaftAddr: addr}}
		c.cfg.RaftAddr = addr
	}
	stream := &streamLayer{m: c.mux, addr: advertised(addr), closed: make(chan struct{})}
	trans := &guardedTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  newHCLog(c.log, "raft-net"),
	}), closed: make(chan struct{}), peers: newPeerHealth(c.log, time.Now)}
	c.trans = trans
	cleanup = append(cleanup, func() { trans.Close() })

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(cfg.NodeID))
	rc.HeartbeatTimeout = cfg.Raft.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Raft.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Raft.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Raft.CommitTimeout
	rc.MaxAppendEntries = cfg.Raft.MaxAppendEntries
	rc.SnapshotInterval = cfg.Raft.SnapshotInterval
	rc.SnapshotThreshold = cfg.Raft.SnapshotThreshold
	rc.TrailingLogs = cfg.Raft.TrailingLogs
	rc.BatchApplyCh = true
	// An active controller removed from the voters (quorum.go) stays a
	// follower until Close, rather than shut Raft down half-way (the
	// transport left open).
	rc.ShutdownOnRemove = false
	rc.NoLegacyTelemetry = true
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: raft: %v", ErrInvalidConfig, err)
	}

	exists, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("controller: read raft state: %w", err)
	}
	if !exists && c.voter { // a broker starts empty and joins (membership.go)
		var voters raft.Configuration
		for _, p := range c.cfg.Peers {
			voters.Servers = append(voters.Servers, raft.Server{
				Suffrage: raft.Voter,
				ID:       raft.ServerID(strconv.Itoa(p.ID)),
				Address:  raft.ServerAddress(p.RaftAddr),
			})
		}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, voters); err != nil {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, c.fsm, logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	c.raft = r
	trans.raft.Store(r)
	c.obsCh = make(chan raft.Observation, 16)
	c.obs = raft.NewObserver(c.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(c.obs)
	markReady()
	return nil
}

// Close stops the member: it lets the changes already proposed finish,
// stops Raft, closes every connection and waits for every goroutine. The
// quorum carries on without it; Start with the same Config resumes it.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.handOver()
		close(c.stop)
		c.loopDone.Wait()
		close(c.loopEnded)
		// Raft answers every proposal while it runs (commit, or step-down);
		// only then is it safe to stop it.
		c.completerDone.Wait()
		c.raft.DeregisterObserver(c.obs)
		// Raft's goroutines end once their requests to peers do: closing
		// every connection first ends those at once, rather than at the
		// transport's timeout when a peer is cut off.
		shut := c.raft.Shutdown()
		c.cancel()
		c.mux.close()
		if err := shut.Error(); err != nil {
			c.closeErr = fmt.Errorf("controller: shutdown raft: %w", err)
		}
		c.trans.Close() // Raft closes it only on its own Shutdown; again is a no-op
		c.trans.seal()  // no heartbeat reaches the store from here on
		if err := c.store.Close(); err != nil && c.closeErr == nil {
			c.closeErr = fmt.Errorf("controller: close raft store: %w", err)
		}
		c.fsm.shut()
	})
	return c.closeErr
}

// handOver transfers Raft leadership to another voter when this member is
// the active controller (raft.LeadershipTransfer, bounded by Raft's
// ElectionTimeout): the new controller is elected at once instead of
// after the others' heartbeat timeout, and it commits, so every member
// applies what this one committed last (a controlled shutdown's fencing)
// without waiting for an election. A quorum that is gone makes it fail, and
// Close goes on.
func (c *Controller) handOver() {
	if c.raft.State() != raft.Leader || len(c.cfg.Peers) < 2 {
		return
	}
	start := time.Now()
	if err := c.raft.LeadershipTransfer().Error(); err != nil {
		c.log.Info("controller: leadership not handed over", "err", err, "after", time.Since(start).Round(time.Millisecond))
		return
	}
	c.log.Debug("controller: leadership handed over", "after", time.Since(start).Round(time.Millisecond))
}

// ID returns this member's NodeID.
func (c *Controller) ID() int { return c.cfg.NodeID }

// Addr returns the address this member listens on.
func (c *Controller) Addr() string { return c.cfg.RaftAddr }

// HeartbeatInterval is how often brokers should heartbeat.
func (c *Controller) HeartbeatInterval() time.Duration { return c.cfg.HeartbeatInterval }

// Leader returns the active controller as this member knows it: its ID and
// address, or ok false while there is none (an election is under way, or
// this member is cut off).
func (c *Controller) Leader() (id int, addr string, ok bool) {
	a, sid := c.raft.LeaderWithID()
	if sid == "" {
		return 0, "", false
	}
	id, err := strconv.Atoi(string(sid))
	if err != nil {
		return 0, "", false
	}
	return id, string(a), true
}

// WaitLeader waits until this member knows an active controller and
// returns it. A member that is cut off keeps believing in the old leader
// until its Raft heartbeat timeout passes.
func (c *Controller) WaitLeader(ctx context.Context) (id int, addr string, err error) {
	for {
		changed := c.leaderWatch()
		if id, addr, ok := c.Leader(); ok {
			return id, addr, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-c.stop:
			return 0, "", ErrClosed
		}
	}
}

// Image returns the metadata as this member has applied it.
func (c *Controller) Image() *Image { return c.fsm.image() }

// Wait returns the metadata as soon as this member has applied a version
// above afterVersion, or the context's error. Wait(ctx, img.Version())
// waits for the next change after img.
func (c *Controller) Wait(ctx context.Context, afterVersion uint64) (*Image, error) {
	return c.fsm.wait(ctx, afterVersion)
}

// Snapshot makes this member snapshot its metadata now and compact its log.
func (c *Controller) Snapshot() error {
	if err := c.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("controller: snapshot: %w", err)
	}
	return nil
}

// RegisterBroker registers a broker and returns its new broker epoch. The
// broker starts fenced; its first heartbeat without WantFence unfences it.
func (c *Controller) RegisterBroker(ctx context.Context, reg BrokerRegistration) (int64, error) {
	r, err := c.Register(ctx, reg)
	return r.Epoch, err
}

// Registered is a broker's registration as committed.
type Registered struct {
	Epoch int64 // the broker's new epoch
	// Version is the metadata version the registration committed at: a
	// broker whose image has reached it knows everything the cluster did
	// before it registered (KRaft's "caught up"), and may then ask to be
	// unfenced.
	Version uint64
}

// Register is RegisterBroker, with the version the registration
// committed at.
func (c *Controller) Register(ctx context.Context, reg BrokerRegistration) (Registered, error) {
	if err := c.ensureJoined(ctx); err != nil {
		return Registered{}, err
	}
	out, err := c.call(ctx, op{Kind: opRegister, Register: reg})
	return Registered{Epoch: out.Epoch, Version: out.Version}, err
}

// Heartbeat renews a broker's session and fences or unfences it.
func (c *Controller) Heartbeat(ctx context.Context, hb HeartbeatRequest) (HeartbeatResponse, error) {
	out, err := c.call(ctx, op{Kind: opHeartbeat, Heartbeat: hb})
	return out.Heartbeat, err
}

// CreateTopic creates a topic and returns it as committed.
func (c *Controller) CreateTopic(ctx context.Context, name string, spec TopicSpec) (TopicInfo, error) {
	out, err := c.call(ctx, op{Kind: opCreateTopic, Topic: name, Spec: spec})
	return out.Topic, err
}

// CreatePartitions grows a topic to total partitions and returns it.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int) (TopicInfo, error) {
	out, err := c.call(ctx, op{Kind: opCreatePartitions, Topic: name, Total: total})
	return out.Topic, err
}

// DeleteTopic deletes a topic.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.call(ctx, op{Kind: opDeleteTopic, Topic: name})
	return err
}

// AlterPartition proposes a new ISR for a partition the calling broker
// leads; it returns the partition's state after the change.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) (PartitionState, error) {
	out, err := c.call(ctx, op{Kind: opAlterPartition, Alter: req})
	return out.Partition, err
}

// call delivers o to the active controller — this member or another — and
// retries while that is safe: no leader known, the member asked was not
// the leader, or it could not be reached. It gives up when ctx ends, with
// the last *NotControllerError joined to the context's error.
func (c *Controller) call(ctx context.Context, o op) (outcome, error) {
	select {
	case <-c.stop:
		return outcome{}, ErrClosed
	default:
	}
	ctx, cancel := c.requestContext(ctx, 0)
	defer cancel()
	backoff := 2 * time.Millisecond
	for {
		changed := c.leaderWatch()
		out, err := c.callOnce(ctx, o)
		if err == nil || !errors.Is(err, ErrNotController) {
			return out, c.closedOr(err)
		}
		var nc *NotControllerError
		if !c.voter && errors.As(err, &nc) && nc.LeaderAddr != "" && nc.Err == nil {
			c.hint.Store(&Peer{ID: nc.LeaderID, RaftAddr: nc.LeaderAddr})
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if c.ctx.Err() != nil {
				return outcome{}, ErrClosed
			}
			return outcome{}, fmt.Errorf("%w; %w", err, ctx.Err())
		case <-changed:
			t.Stop()
		case <-t.C:
			backoff = min(2*backoff, 250*time.Millisecond)
		}
	}
}

func (c *Controller) closedOr(err error) error {
	if err != nil && c.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return ErrClosed
	}
	return err
}

func (c *Controller) callOnce(ctx context.Context, o op) (outcome, error) {
	id, addr, ok := c.Leader()
	switch {
	case !ok && !c.voter:
		id, addr = c.voterToAsk()
		return c.forward(ctx, id, addr, o)
	case !ok:
		return outcome{}, &NotControllerError{}
	case id == c.cfg.NodeID:
		return c.serveLocal(ctx, o)
	default:
		return c.forward(ctx, id, addr, o)
	}
}

// handleLocal hands o to this member's event loop if it is the leader.
func (c *Controller) handleLocal(ctx context.Context, o op) (outcome, error) {
	if c.raft == nil || c.raft.State() != raft.Leader { // nil: a forwarded request to a start that failed
		return outcome{}, c.notController()
	}
	req := &request{op: o, done: make(chan reply, 1)}
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	case <-c.stop:
		return outcome{}, ErrClosed
	}
	select {
	case r := <-req.done:
		return r.out, r.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	case <-c.stop:
		return outcome{}, ErrClosed
	}
}

func (c *Controller) notController() error {
	id, addr, ok := c.Leader()
	if !ok || id == c.cfg.NodeID {
		return &NotControllerError{}
	}
	return &NotControllerError{LeaderID: id, LeaderAddr: addr}
}

// leaderWatch returns a channel closed at the next leader observation.
func (c *Controller) leaderWatch() <-chan struct{} {
	c.leaderMu.Lock()
	defer c.leaderMu.Unlock()
	return c.leaderChanged
}

// observe turns Raft's leader observations into leaderChanged broadcasts.
func (c *Controller) observe() {
	defer c.loopDone.Done()
	ch := c.obsCh
	for {
		select {
		case <-c.stop:
			return
		case o := <-ch:
			if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
				if id, err := strconv.Atoi(string(lo.LeaderID)); err == nil && id != c.cfg.NodeID {
					c.lastLeader.Store(int64(id))
				}
			}
			c.leaderMu.Lock()
			close(c.leaderChanged)
			c.leaderChanged = make(chan struct{})
			c.leaderMu.Unlock()
		}
	}
}
