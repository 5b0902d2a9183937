package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Voters that change (KIP-853's AddRaftVoter, RemoveRaftVoter and
// DescribeQuorum) over hashicorp/raft's configuration changes, one at a
// time on the active controller. A voter is added by promoting a member
// that already follows the metadata as a non-voter (a broker only, started
// with Peers naming the voters), and only once it has applied everything
// the active controller had applied when the request came (Kafka's
// "caught up" check), so that the new majority can commit at once. A voter
// is removed only while a majority of the voters that remain answer, so
// the quorum never loses its majority by the removal; the last voter is
// never removed. A removed voter loses its vote, not its place (Raft's
// DemoteVoter): it follows the metadata as an observer, as a broker only
// does, until it is stopped and unregistered (membership.go). The active
// controller may remove itself: Raft hands the leadership on once the
// change commits.

var (
	// ErrDuplicateVoter: the member is a voter already (DUPLICATE_VOTER).
	ErrDuplicateVoter = errors.New("controller: already a voter")
	// ErrVoterNotFound: the member is not a voter (VOTER_NOT_FOUND).
	ErrVoterNotFound = errors.New("controller: not a voter")
	// ErrVoterChangeInProgress: another voter change has not finished.
	ErrVoterChangeInProgress = errors.New("controller: a voter change is in progress")
	// ErrVoterNotCaughtUp: the member to promote did not apply the
	// metadata up to the active controller's within the request's time.
	ErrVoterNotCaughtUp = errors.New("controller: the new voter has not caught up with the metadata")
	// ErrNoMajorityAfter: too few of the voters that would remain answer
	// for them to make a majority.
	ErrNoMajorityAfter = errors.New("controller: the voters left would not have a live majority")
)

var quorumWireErrors = []wireErrorCode{
	{"duplicate_voter", ErrDuplicateVoter},
	{"voter_not_found", ErrVoterNotFound},
	{"voter_change_in_progress", ErrVoterChangeInProgress},
	{"voter_not_caught_up", ErrVoterNotCaughtUp},
	{"no_majority_after", ErrNoMajorityAfter},
}

// QuorumMember is one server of the controller's Raft configuration.
type QuorumMember struct {
	ID       int
	RaftAddr string
	Voter    bool // false: a broker only (a Raft non-voter)
	// Applied is the metadata version (Raft index) the member has applied,
	// as it answered DescribeQuorum; -1 when it did not answer. Members
	// leaves it 0.
	Applied int64
}

// QuorumInfo is the controller quorum as the active controller describes
// it (Kafka's DescribeQuorum).
type QuorumInfo struct {
	LeaderID int
	// Term is the Raft term of the leader: Kafka's leader epoch.
	Term uint64
	// HighWatermark is the metadata version (Raft index) the active
	// controller has applied: Kafka's high watermark, to which each
	// member's Applied compares.
	HighWatermark uint64
	Voters        []QuorumMember
	Observers     []QuorumMember // the brokers only (non-voters)
}

// Members returns the Raft configuration as this member knows it (the
// latest, committed or not): the voters and the brokers that follow the
// metadata as non-voters, in configuration order.
func (c *Controller) Members() ([]QuorumMember, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("controller: raft configuration: %w", err)
	}
	var out []QuorumMember
	for _, s := range f.Configuration().Servers {
		id, err := strconv.Atoi(string(s.ID))
		if err != nil {
			return nil, fmt.Errorf("%w: raft server id %q", ErrCorrupt, s.ID)
		}
		out = append(out, QuorumMember{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// DescribeQuorum returns the quorum as the active controller knows it,
// with the metadata version each member has applied.
func (c *Controller) DescribeQuorum(ctx context.Context) (QuorumInfo, error) {
	out, err := c.call(ctx, op{Kind: opDescribeQuorum})
	return out.Quorum, err
}

// AddVoter promotes member id, which follows the metadata as a non-voter,
// to a voter (KIP-853's AddRaftVoter), once it has caught up.
func (c *Controller) AddVoter(ctx context.Context, id int) error {
	_, err := c.call(ctx, op{Kind: opAddVoter, BrokerID: id})
	return err
}

// RemoveVoter removes voter id from the quorum (KIP-853's
// RemoveRaftVoter): it keeps following the metadata as an observer.
func (c *Controller) RemoveVoter(ctx context.Context, id int) error {
	_, err := c.call(ctx, op{Kind: opRemoveVoter, BrokerID: id})
	return err
}

// leaderOnly checks, on the member serving a forwarded quorum request,
// that it is the active controller.
func (c *Controller) leaderOnly() error {
	if c.raft == nil || c.raft.State() != raft.Leader {
		return c.notController()
	}
	return nil
}

// handleDescribeQuorum answers DescribeQuorum on the active controller.
func (c *Controller) handleDescribeQuorum(ctx context.Context) (outcome, error) {
	if err := c.leaderOnly(); err != nil {
		return outcome{}, err
	}
	members, err := c.Members()
	if err != nil {
		return outcome{}, err
	}
	term, _ := strconv.ParseUint(c.raft.Stats()["term"], 10, 64)
	q := QuorumInfo{LeaderID: c.cfg.NodeID, Term: term, HighWatermark: c.fsm.image().Version()}
	applied := c.appliedBy(ctx, members, time.Second)
	for i, m := range members {
		m.Applied = applied[i]
		if m.Voter {
			q.Voters = append(q.Voters, m)
		} else {
			q.Observers = append(q.Observers, m)
		}
	}
	return outcome{Quorum: q}, nil
}

// appliedBy asks every member, at once, for the metadata version it has
// applied; -1 for one that does not answer within wait.
func (c *Controller) appliedBy(ctx context.Context, members []QuorumMember, wait time.Duration) []int64 {
	out := make([]int64, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.ID == c.cfg.NodeID {
			out[i] = int64(c.fsm.image().Version())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			o, err := c.forward(ctx, m.ID, m.RaftAddr, op{Kind: opApplied})
			if err != nil {
				out[i] = -1
				return
			}
			out[i] = int64(o.Version)
		}()
	}
	wg.Wait()
	return out
}

// handleApplied answers, on any member, the metadata version it has
// applied, once it has applied o.Version (0: at once).
func (c *Controller) handleApplied(ctx context.Context, o op) (outcome, error) {
	v := uint64(o.Version)
	if v > 0 {
		img, err := c.fsm.wait(ctx, v-1)
		if err != nil {
			return outcome{}, fmt.Errorf("%w: applied %d, waiting for %d: %w", ErrVoterNotCaughtUp, c.fsm.image().Version(), v, err)
		}
		return outcome{Version: img.Version()}, nil
	}
	return outcome{Version: c.fsm.image().Version()}, nil
}

// handleAddVoter promotes a non-voter on the active controller.
func (c *Controller) handleAddVoter(ctx context.Context, o op) (outcome, error) {
	if err := c.leaderOnly(); err != nil {
		return outcome{}, err
	}
	if !c.voterChange.TryLock() {
		return outcome{}, ErrVoterChangeInProgress
	}
	defer c.voterChange.Unlock()
	members, err := c.Members()
	if err != nil {
		return outcome{}, err
	}
	var target *QuorumMember
	for i := range members {
		if members[i].ID == o.BrokerID {
			target = &members[i]
		}
	}
	switch {
	case target == nil:
		return outcome{}, fmt.Errorf("%w: member %d does not follow the metadata: start it with the voters as its peers (a broker only) first", ErrInvalidRequest, o.BrokerID)
	case target.Voter:
		return outcome{}, fmt.Errorf("%w: %d", ErrDuplicateVoter, o.BrokerID)
	}
	// Caught up: it has applied what this member had when asked.
	want := c.fsm.image().Version()
	if _, err := c.forward(ctx, target.ID, target.RaftAddr, op{Kind: opApplied, Version: int64(want)}); err != nil {
		if errors.Is(err, ErrVoterNotCaughtUp) || ctx.Err() != nil {
			return outcome{}, fmt.Errorf("%w: member %d: %w", ErrVoterNotCaughtUp, target.ID, err)
		}
		return outcome{}, fmt.Errorf("%w: member %d unreachable: %w", ErrVoterNotCaughtUp, target.ID, err)
	}
	if err := c.raft.AddVoter(raft.ServerID(strconv.Itoa(target.ID)), raft.ServerAddress(target.RaftAddr), 0, timeoutOf(ctx)).Error(); err != nil {
		return outcome{}, c.raftChangeError(err)
	}
	c.log.Info("controller: voter added", "member", target.ID, "addr", target.RaftAddr)
	return outcome{}, nil
}

// handleRemoveVoter removes a voter on the active controller.
func (c *Controller) handleRemoveVoter(ctx context.Context, o op) (outcome, error) {
	if err := c.leaderOnly(); err != nil {
		return outcome{}, err
	}
	if !c.voterChange.TryLock() {
		return outcome{}, ErrVoterChangeInProgress
	}
	defer c.voterChange.Unlock()
	members, err := c.Members()
	if err != nil {
		return outcome{}, err
	}
	found := false
	var remain []QuorumMember
	for _, m := range members {
		switch {
		case !m.Voter:
		case m.ID == o.BrokerID:
			found = true
		default:
			remain = append(remain, m)
		}
	}
	switch {
	case !found:
		return outcome{}, fmt.Errorf("%w: %d", ErrVoterNotFound, o.BrokerID)
	case len(remain) == 0:
		return outcome{}, fmt.Errorf("%w: %d is the last voter", ErrNoMajorityAfter, o.BrokerID)
	}
	live := 0
	for _, v := range c.appliedBy(ctx, remain, 2*time.Second) {
		if v >= 0 {
			live++
		}
	}
	if 2*live <= len(remain) {
		return outcome{}, fmt.Errorf("%w: %d of the %d voters left answer", ErrNoMajorityAfter, live, len(remain))
	}
	if err := c.raft.DemoteVoter(raft.ServerID(strconv.Itoa(o.BrokerID)), 0, timeoutOf(ctx)).Error(); err != nil {
		return outcome{}, c.raftChangeError(err)
	}
	c.log.Info("controller: voter removed; it follows as an observer", "member", o.BrokerID)
	return outcome{}, nil
}

// timeoutOf is what is left of ctx's deadline; 0 (none) without one.
func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 0
}
