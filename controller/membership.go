package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Members that are not voters (KRaft's process.roles=broker): Config.Peers
// names the quorum's voters, and a member whose NodeID is not among them
// is a broker only. It runs a Raft node that the active controller adds
// as a non-voter (raft.AddNonvoter): it receives and applies the committed
// metadata like a voter, so Image and Wait work the same, but it never
// votes, never stands for election and does not count towards a commit's
// majority. It joins at Start, in the background, by asking a voter (any:
// a voter that is not the active controller names the one that is), and
// again whenever it registers while not in the Raft configuration (it was
// unregistered while it ran). Until it has joined it knows no active
// controller, and its requests go to the voters of Config.Peers in turn.
//
// UnregisterBroker (Kafka's API key 64) removes a broker from the
// metadata, refused while a partition lists it as a replica, and then
// removes it from the Raft configuration when it is a non-voter there.

// ErrBrokerHasReplicas is returned by UnregisterBroker while a partition
// still lists the broker as a replica: move them away (or delete their
// topics) first.
var ErrBrokerHasReplicas = errors.New("controller: broker holds replicas")

// memberWireErrors extend the forwarding RPC's error codes (errors.go)
// with this file's sentinels.
var memberWireErrors = []wireErrorCode{
	{"broker_has_replicas", ErrBrokerHasReplicas},
}

// wireCode is errorCode with memberWireErrors first.
func wireCode(err error) string {
	for _, c := range slices.Concat(memberWireErrors, quorumWireErrors, electWireErrors, reassignWireErrors) {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return errorCode(err)
}

// wireError is errorForCode with memberWireErrors first.
func wireError(code string) error {
	for _, c := range slices.Concat(memberWireErrors, quorumWireErrors, electWireErrors, reassignWireErrors) {
		if c.code == code {
			return c.err
		}
	}
	return errorForCode(code)
}

// unregisterBrokerRecord: the broker with this epoch is gone from the
// metadata (Kafka's UnregisterBrokerRecord). Its epoch stays used: a later
// registration gets a new one.
type unregisterBrokerRecord struct {
	ID    int
	Epoch int64
}

// decideUnregisterBroker removes broker id from the metadata, refused
// while any partition lists it as a replica.
func decideUnregisterBroker(img *Image, id int) ([]record, error) {
	b, ok := img.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	n := 0
	var first string
	for _, t := range img.sortedTopics() {
		for _, p := range t.parts {
			if slices.Contains(p.Replicas, id) {
				if n == 0 {
					first = fmt.Sprintf("%s-%d", t.name, p.Partition)
				}
				n++
			}
		}
	}
	if n > 0 {
		return nil, fmt.Errorf("%w: broker %d is a replica of %d partitions (%s first); move them first", ErrBrokerHasReplicas, id, n, first)
	}
	return []record{unregisterBrokerRecord{ID: id, Epoch: b.Epoch}}, nil
}

// Voter reports whether this member is a voter of the controller quorum
// as configured (its NodeID is in Config.Peers); false: a broker only.
func (c *Controller) Voter() bool { return c.voter }

// isVoter reports whether id is among the configured voters.
func (cfg Config) isVoter(id int) bool {
	return slices.ContainsFunc(cfg.Peers, func(p Peer) bool { return p.ID == id })
}

// UnregisterBroker removes broker id from the metadata (Kafka's
// UnregisterBroker): ErrBrokerHasReplicas while a partition lists it as a
// replica, ErrUnknownBroker when it is not registered. A broker that still
// runs registers again with its next heartbeat, as in Kafka: stop it first.
func (c *Controller) UnregisterBroker(ctx context.Context, id int) error {
	_, err := c.call(ctx, op{Kind: opUnregister, BrokerID: id})
	return err
}

// handleUnregister runs on the active controller: the metadata change
// through the event loop, then the removal of a non-voter from the Raft
// configuration. A broker already gone from the metadata that is still a
// non-voter (a removal cut short by a failover) is removed now.
func (c *Controller) handleUnregister(ctx context.Context, o op) (outcome, error) {
	out, err := c.handleLocal(ctx, o)
	if err != nil && !(errors.Is(err, ErrUnknownBroker) && c.isNonvoter(o.BrokerID)) {
		return out, err
	}
	if !c.isNonvoter(o.BrokerID) {
		return out, err
	}
	timeout := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if rerr := c.raft.RemoveServer(raft.ServerID(strconv.Itoa(o.BrokerID)), 0, timeout).Error(); rerr != nil {
		return out, c.raftChangeError(rerr)
	}
	return out, nil
}

// isNonvoter reports whether id is a non-voter of the Raft configuration.
func (c *Controller) isNonvoter(id int) bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(strconv.Itoa(id)) {
			return s.Suffrage == raft.Nonvoter
		}
	}
	return false
}

// inConfiguration reports whether this member is in its Raft
// configuration, as a voter or not.
func (c *Controller) inConfiguration() bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	self := raft.ServerID(strconv.Itoa(c.cfg.NodeID))
	for _, s := range f.Configuration().Servers {
		if s.ID == self {
			return true
		}
	}
	return false
}

// handleJoin runs on the active controller: it adds the broker o.Join as a
// non-voter (or updates its address). A voter's ID cannot join this way.
func (c *Controller) handleJoin(ctx context.Context, o op) (outcome, error) {
	p := o.Join
	if p.ID <= 0 || p.RaftAddr == "" {
		return outcome{}, fmt.Errorf("%w: a member joins with an ID > 0 and an address (got %d, %q)", ErrInvalidRequest, p.ID, p.RaftAddr)
	}
	if c.raft == nil || c.raft.State() != raft.Leader {
		return outcome{}, c.notController()
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return outcome{}, c.raftChangeError(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(strconv.Itoa(p.ID)) && s.Suffrage == raft.Voter {
			if string(s.Address) == p.RaftAddr {
				return outcome{}, nil
			}
			return outcome{}, fmt.Errorf("%w: member %d is a voter at %s, not %s", ErrInvalidRequest, p.ID, s.Address, p.RaftAddr)
		}
	}
	timeout := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if err := c.raft.AddNonvoter(raft.ServerID(strconv.Itoa(p.ID)), raft.ServerAddress(p.RaftAddr), 0, timeout).Error(); err != nil {
		return outcome{}, c.raftChangeError(err)
	}
	c.log.Info("controller: broker joined as a non-voter", "member", p.ID, "addr", p.RaftAddr)
	return outcome{}, nil
}

// raftChangeError maps a failed Raft configuration change: not the leader
// (retried elsewhere), lost leadership (outcome unknown), or as it is.
func (c *Controller) raftChangeError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return c.notController()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("controller: raft configuration change: %w (%w)", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("controller: raft configuration change: %w", err)
}

// ensureJoined joins this broker to the Raft configuration as a
// non-voter unless it is in it already (a voter always is).
func (c *Controller) ensureJoined(ctx context.Context) error {
	if c.voter || c.inConfiguration() {
		return nil
	}
	_, err := c.call(ctx, op{Kind: opJoin, Join: Peer{ID: c.cfg.NodeID, RaftAddr: c.cfg.RaftAddr}})
	return err
}

// join runs from Start on a broker: it joins the quorum as a non-voter,
// retrying until it has or the member closes.
func (c *Controller) join() {
	defer c.loopDone.Done()
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		err := c.ensureJoined(ctx)
		cancel()
		if err == nil {
			return
		}
		c.log.Debug("controller: join as a non-voter", "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// voterToAsk picks the member a broker that knows no active controller
// sends a request to: the leader a voter named last, else the configured
// voters in turn.
func (c *Controller) voterToAsk() (int, string) {
	if h := c.hint.Swap(nil); h != nil {
		return h.ID, h.RaftAddr
	}
	n := c.nextVoter.Add(1)
	p := c.cfg.Peers[int(n%uint64(len(c.cfg.Peers)))]
	return p.ID, p.RaftAddr
}
