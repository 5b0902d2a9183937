package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-log/strata/clock"
)

// The event loop: one goroutine that, while this member is the Raft leader,
// holds the working image (the committed image plus everything proposed
// since), decides each request on it, applies the resulting records to it
// at once, and proposes them — the records of every request waiting at that
// moment in one Raft entry. A second goroutine, the completer, waits for
// the entries in log order and answers the requests. Broker session
// deadlines live here too, as soft state of the active controller.

const (
	maxBatch = 1024 // requests per Raft entry
	// maxInflight bounds the entries proposed and not yet answered. While
	// the window is full, new requests wait, and then go together into one
	// entry: under load, entries grow instead of multiplying, which spares
	// Raft's per-entry work (encoding, store, replication, futures).
	maxInflight = 2
)

type request struct {
	op   op
	done chan reply // buffered: the answer never blocks its sender
}

type reply struct {
	out outcome
	err error
}

type proposal struct {
	future raft.ApplyFuture
	reqs   []*request
	outs   []outcome
}

// leaderState is what only the active controller has.
type leaderState struct {
	img       *Image
	deadlines map[int]time.Time // session expiry of each broker
	fence     clock.Timer       // fires at the earliest expiry
	rebalance clock.Timer       // preferred-leader check; nil when disabled
	// rebalanceAt is when rebalance fires; a rebuilt working image keeps it,
	// so that failed proposals do not keep putting the check off.
	rebalanceAt time.Time
}

func (c *Controller) run() {
	defer c.loopDone.Done()
	var st *leaderState
	defer func() { st.stopFence() }()
	var fence, rebalance <-chan time.Time
	for {
		fence, rebalance = nil, nil
		if st != nil {
			fence = st.fence.C()
			if st.rebalance != nil {
				rebalance = st.rebalance.C()
			}
		}
		reqs := c.reqs
		if c.inflight.Load() >= maxInflight {
			reqs = nil
		}
		select {
		case <-c.settled:
			// a proposal was answered: the window may have room again
		case <-c.stop:
			return
		case isLeader := <-c.raft.LeaderCh():
			st.stopFence()
			st = nil
			if isLeader {
				st = c.becomeLeader(nil, time.Time{})
			}
		case <-c.failed:
			// The working image has a change that did not commit. Rebuild it
			// from the committed image now, if still leader, so that the
			// session timer keeps running even if no request comes.
			st = c.rebuild(st)
		case <-fence:
			if !c.fenceExpired(st) {
				st = c.rebuild(st)
			}
		case <-rebalance:
			if !c.rebalanceLeaders(st) {
				st = c.rebuild(st)
			}
		case req := <-reqs:
			if st == nil && c.raft.State() == raft.Leader {
				st = c.becomeLeader(nil, time.Time{})
			}
			if st == nil {
				req.done <- reply{err: c.notController()}
				continue
			}
			batch := []*request{req}
		drain:
			for len(batch) < maxBatch {
				select {
				case r := <-c.reqs:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			if !c.decideAndPropose(st, batch) {
				st = c.rebuild(st)
			}
		}
	}
}

// rebuild replaces a working image that holds a change that did not
// commit, if this member is still the leader, keeping the broker sessions.
func (c *Controller) rebuild(prev *leaderState) *leaderState {
	prev.stopFence()
	if c.raft.State() != raft.Leader {
		return nil
	}
	var deadlines map[int]time.Time
	var rebalanceAt time.Time
	if prev != nil {
		deadlines, rebalanceAt = prev.deadlines, prev.rebalanceAt
	}
	return c.becomeLeader(deadlines, rebalanceAt)
}

// becomeLeader waits until this member has applied every committed entry,
// then takes the image as its working image. Every live broker without a
// session in deadlines gets a full one from now; the preferred-leader check
// is due at rebalanceAt (zero: one interval from now).
func (c *Controller) becomeLeader(deadlines map[int]time.Time, rebalanceAt time.Time) *leaderState {
	if err := c.raft.Barrier(0).Error(); err != nil {
		c.log.Debug("controller: not taking over", "err", err)
		return nil
	}
	if deadlines == nil {
		deadlines = make(map[int]time.Time)
	}
	st := &leaderState{img: c.fsm.working(), deadlines: deadlines}
	now := c.cfg.Clock.Now()
	prev, prevDeadline := c.previousLeaderDeadline(now)
	for _, id := range st.img.liveBrokers() {
		if _, ok := st.deadlines[id]; !ok {
			st.deadlines[id] = now.Add(c.cfg.SessionTimeout)
			if id == prev {
				st.deadlines[id] = prevDeadline
			}
		}
	}
	c.armFence(st)
	if d := c.cfg.LeaderImbalanceCheckInterval; d > 0 {
		if rebalanceAt.IsZero() {
			rebalanceAt = now.Add(d)
		}
		st.rebalanceAt = rebalanceAt
		st.rebalance = c.cfg.Clock.NewTimer(rebalanceAt.Sub(now))
	}
	c.log.Info("controller: active", "version", st.img.Version(), "brokers", len(st.img.brokers), "topics", len(st.img.topics))
	return st
}

// previousLeaderDeadline returns the member that led before this one and
// the end of its broker's session counted from Raft's last contact with
// it, not from now: when the active controller's process dies, its broker
// dies with it, and its heartbeats (to its own controller) stopped when
// its Raft heartbeats did. Counted from the takeover, fencing it (and so
// moving the leadership of its partitions) waited an election plus a whole
// session. A member that hears nothing from Raft's last leader has no
// better sign of its broker's last heartbeat; if the broker lives, it
// heartbeats to this controller within its session as usual. 0 when there
// was none, or no contact is known.
func (c *Controller) previousLeaderDeadline(now time.Time) (int, time.Time) {
	prev := int(c.lastLeader.Load())
	last := c.raft.LastContact()
	if prev == 0 || last.IsZero() {
		return 0, time.Time{}
	}
	// LastContact is on the wall clock; the session runs on cfg.Clock.
	d := now.Add(c.cfg.SessionTimeout - time.Since(last))
	if d.After(now.Add(c.cfg.SessionTimeout)) {
		d = now.Add(c.cfg.SessionTimeout)
	}
	return prev, d
}

// armFence sets the fence timer to the earliest session expiry, or a full
// session from now when no broker is live. Deadlines only move later, so
// the timer never fires late (unless the clock moves between the Now and
// the Reset here: a fake clock advanced at that moment makes it late by as
// much, and the next expiry check catches up).
func (c *Controller) armFence(st *leaderState) {
	now := c.cfg.Clock.Now()
	next := now.Add(c.cfg.SessionTimeout)
	for _, id := range st.img.liveBrokers() {
		if d, ok := st.deadlines[id]; ok && d.Before(next) {
			next = d
		}
	}
	if st.fence == nil {
		st.fence = c.cfg.Clock.NewTimer(next.Sub(now))
	} else {
		st.fence.Reset(next.Sub(now))
	}
}

// stopFence stops the timers of st, if any, when st is dropped.
func (st *leaderState) stopFence() {
	if st == nil {
		return
	}
	if st.fence != nil {
		st.fence.Stop()
	}
	if st.rebalance != nil {
		st.rebalance.Stop()
	}
}

// rebalanceLeaders moves leadership back to preferred replicas where the
// imbalance calls for it (decidePreferredLeaders), and arms the next
// check; false means the working image can no longer be trusted.
func (c *Controller) rebalanceLeaders(st *leaderState) bool {
	if recs := decidePreferredLeaders(st.img, c.cfg.LeaderImbalancePercentage); len(recs) > 0 {
		c.log.Info("controller: moving leadership back to preferred replicas", "partitions", len(recs))
		if err := c.applyWorking(st, recs); err != nil {
			return false
		}
		c.propose(recs, nil, nil)
	}
	st.rebalanceAt = c.cfg.Clock.Now().Add(c.cfg.LeaderImbalanceCheckInterval)
	st.rebalance.Reset(c.cfg.LeaderImbalanceCheckInterval)
	return true
}

// fenceExpired fences the brokers whose sessions have expired; false means
// the working image can no longer be trusted.
func (c *Controller) fenceExpired(st *leaderState) bool {
	now := c.cfg.Clock.Now()
	if recs := decideFenceExpired(st.img, st.deadlines, now); len(recs) > 0 {
		for _, r := range recs {
			if r, ok := r.(fenceBrokerRecord); ok {
				c.log.Info("controller: fencing broker, session expired", "broker", r.ID, "epoch", r.Epoch)
			}
		}
		if err := c.applyWorking(st, recs); err != nil {
			return false
		}
		c.propose(recs, nil, nil)
	}
	c.armFence(st)
	return true
}

// decideAndPropose decides each request on the working image and proposes
// the records of all of them as one entry. It returns false if the working
// image can no longer be trusted.
func (c *Controller) decideAndPropose(st *leaderState, batch []*request) bool {
	var recs []record
	var reqs []*request
	var outs []outcome
	ok := true
	for i, req := range batch {
		if !ok {
			// The working image is gone; these were not decided. Retryable.
			for _, rest := range batch[i:] {
				rest.done <- reply{err: &NotControllerError{}}
			}
			break
		}
		r, out, err := c.decide(st, req.op)
		if err == nil && len(r) > 0 {
			if aerr := c.applyWorking(st, r); aerr != nil {
				err, ok = aerr, false
			}
		}
		if err == nil && req.op.Kind != opHeartbeat {
			out = c.result(st, req.op, out)
		}
		switch {
		case err != nil:
			req.done <- reply{err: err}
		case len(r) == 0:
			req.done <- reply{out: out}
		default:
			recs = append(recs, r...)
			reqs = append(reqs, req)
			outs = append(outs, out)
		}
	}
	if len(recs) > 0 {
		c.propose(recs, reqs, outs)
	}
	return ok
}

// decide runs the decision for one request, and updates the session
// deadline of the broker it is from.
func (c *Controller) decide(st *leaderState, o op) ([]record, outcome, error) {
	img := st.img
	switch o.Kind {
	case opRegister:
		recs, err := decideRegisterBroker(img, o.Register)
		if err == nil {
			st.deadlines[o.Register.ID] = c.cfg.Clock.Now().Add(c.cfg.SessionTimeout)
		}
		return recs, outcome{}, err
	case opHeartbeat:
		recs, resp, err := decideHeartbeat(img, o.Heartbeat)
		if err == nil {
			st.deadlines[o.Heartbeat.BrokerID] = c.cfg.Clock.Now().Add(c.cfg.SessionTimeout)
		}
		return recs, outcome{Heartbeat: resp}, err
	case opCreateTopic:
		recs, err := decideCreateTopic(img, o.Topic, o.Spec, c.cfg.Rand)
		return recs, outcome{}, err
	case opCreatePartitions:
		recs, err := decideCreatePartitions(img, o.Topic, o.Total)
		return recs, outcome{}, err
	case opDeleteTopic:
		recs, err := decideDeleteTopic(img, o.Topic)
		return recs, outcome{}, err
	case opAlterPartition:
		recs, err := decideAlterPartition(img, o.Alter)
		return recs, outcome{}, err
	case opAllocateProducerIDs:
		recs, blk, err := decideAllocateProducerIDs(img, o.ProducerIDs)
		return recs, outcome{ProducerIDs: blk}, err
	case opElectLeaders:
		recs, res := decideElectLeaders(img, o.Elect)
		return recs, outcome{Elections: res}, nil
	case opReassign:
		recs, res := decideAlterReassignments(img, o.Reassign)
		return recs, outcome{Reassigned: res}, nil
	case opUnregister:
		recs, err := decideUnregisterBroker(img, o.BrokerID)
		if err == nil {
			delete(st.deadlines, o.BrokerID)
		}
		return recs, outcome{}, err
	case opCreateACLs, opDeleteACLs, opAlterSCRAM, opAlterQuotas:
		return decideSecurity(img, o) // security.go
	case opAlterConfigs:
		recs, res := decideAlterConfigs(img, o.Configs) // configs.go
		return recs, outcome{Configs: res}, nil
	}
	return nil, outcome{}, fmt.Errorf("%w: unknown operation %q", ErrInvalidRequest, o.Kind)
}

// result reads what a request yields from the working image, after its
// records were applied.
func (c *Controller) result(st *leaderState, o op, out outcome) outcome {
	switch o.Kind {
	case opRegister:
		out.Epoch = st.img.brokers[o.Register.ID].Epoch
	case opCreateTopic, opCreatePartitions:
		out.Topic, _ = st.img.Topic(o.Topic)
	case opAlterPartition:
		out.Partition, _ = st.img.Partition(o.Alter.Topic, o.Alter.Partition)
	}
	return out
}

func (c *Controller) applyWorking(st *leaderState, recs []record) error {
	for _, r := range recs {
		if err := st.img.apply(r); err != nil {
			// A decision produced a record its own image rejects: a bug.
			// The caller rebuilds the working image.
			c.log.Error("controller: decision does not apply to the working image", "err", err)
			return fmt.Errorf("controller: internal error: %w", err)
		}
	}
	return nil
}

// propose appends recs to the Raft log as one entry; the completer answers
// reqs once it is committed and applied (or has failed).
func (c *Controller) propose(recs []record, reqs []*request, outs []outcome) {
	// The completer runs until this loop has ended, so this send completes.
	c.inflight.Add(1)
	c.proposals <- proposal{future: c.raft.Apply(encodeEntry(nil, recs), 0), reqs: reqs, outs: outs}
}

// complete answers proposals in log order until the event loop has ended,
// then drains what is left.
func (c *Controller) complete() {
	defer c.completerDone.Done()
	for {
		select {
		case p := <-c.proposals:
			c.finish(p)
		case <-c.loopEnded:
			for {
				select {
				case p := <-c.proposals:
					c.finish(p)
				default:
					return
				}
			}
		}
	}
}

func (c *Controller) finish(p proposal) {
	err := p.future.Error()
	if err == nil {
		if ferr, ok := p.future.Response().(error); ok && ferr != nil {
			err = fmt.Errorf("controller: internal error: %w", ferr)
		}
	}
	if err != nil {
		select {
		case c.failed <- struct{}{}:
		default:
		}
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			err = c.notController() // never appended: safe to retry
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
			err = fmt.Errorf("%w: %v", ErrLeadershipLost, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			err = ErrClosed
		}
	}
	for i, req := range p.reqs {
		out := p.outs[i]
		if err == nil {
			out.Version = p.future.Index()
		}
		req.done <- reply{out: out, err: err}
	}
	if c.inflight.Add(-1) == 0 && err == nil {
		c.nudge()
	}
	select {
	case c.settled <- struct{}{}:
	default:
	}
}

// nudge tells the followers at once that the last proposal committed.
// Raft tells a follower the commit index with the next append, and an idle
// leader sends one only every CommitTimeout (50-100 ms): the members
// learned of a committed fencing, a new partition leader or a new topic
// that much later, and a controller that stopped right after a commit left
// them not knowing until the next controller committed. A barrier is an
// append that carries the commit index now (an empty entry in the log, not
// in the metadata). Only the last of the proposals in flight nudges: the
// appends of the others carry the index anyway.
func (c *Controller) nudge() {
	select {
	case <-c.stop:
		return
	default:
	}
	_ = c.raft.Barrier(0) // not waited for: it commits or fails on its own
}
