package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Leaders on demand (Kafka's ElectLeaders, KIP-460): preferred elections
// move each partition's leadership to its first replica when that replica
// is live and in the ISR; unclean elections give a leaderless partition a
// leader, from its ISR if one of it is live, else any live replica (its
// ISR reset to that one: records it had not replicated are lost, which is
// why it happens only when asked).

// ElectionType is Kafka's election type.
type ElectionType int8

const (
	ElectPreferred ElectionType = 0
	ElectUnclean   ElectionType = 1
)

// The per-partition outcomes of an election that did not elect.
var (
	// ErrElectionNotNeeded: the preferred replica leads already, or (unclean)
	// the partition has a leader (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = errors.New("controller: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is fenced or not
	// in the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = errors.New("controller: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica of the partition is live
	// (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = errors.New("controller: no eligible leader available")
)

var electWireErrors = []wireErrorCode{
	{"election_not_needed", ErrElectionNotNeeded},
	{"preferred_leader_not_available", ErrPreferredLeaderNotAvailable},
	{"eligible_leaders_not_available", ErrEligibleLeadersNotAvailable},
}

// ElectTarget names one partition.
type ElectTarget struct {
	Topic     string
	Partition int
}

// ElectionResult is one partition's outcome: its leader (Err nil) or why
// none was elected.
type ElectionResult struct {
	Topic     string
	Partition int
	Leader    int
	Err       error
}

// electResult is ElectionResult on the wire.
type electResult struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Leader    int    `json:"leader,omitzero"`
	Code      string `json:"code,omitzero"`
	Message   string `json:"message,omitzero"`
}

// electRequest is ElectLeaders on the wire; Targets nil: every partition.
type electRequest struct {
	Type    ElectionType  `json:"type,omitzero"`
	Targets []ElectTarget `json:"targets,omitzero"`
}

// ElectLeaders runs an election of the given type for the targets (nil:
// every partition of every topic) and returns each partition's outcome,
// once the changes are committed.
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, targets []ElectTarget) ([]ElectionResult, uint64, error) {
	if typ != ElectPreferred && typ != ElectUnclean {
		return nil, 0, fmt.Errorf("%w: election type %d", ErrInvalidRequest, typ)
	}
	out, err := c.call(ctx, op{Kind: opElectLeaders, Elect: electRequest{Type: typ, Targets: targets}})
	if err != nil {
		return nil, 0, err
	}
	res := make([]ElectionResult, len(out.Elections))
	for i, r := range out.Elections {
		res[i] = ElectionResult{Topic: r.Topic, Partition: r.Partition, Leader: r.Leader}
		if r.Code != "" {
			if s := wireError(r.Code); s != nil {
				res[i].Err = fmt.Errorf("%w: %s", s, r.Message)
			} else {
				res[i].Err = errors.New(r.Message)
			}
		}
	}
	return res, out.Version, nil
}

// decideElectLeaders decides an election over the targets (nil: every
// partition, in topic name order). Each partition is decided once.
func decideElectLeaders(img *Image, req electRequest) ([]record, []electResult) {
	targets := req.Targets
	if targets == nil {
		for _, t := range img.sortedTopics() {
			for _, p := range t.parts {
				targets = append(targets, ElectTarget{Topic: t.name, Partition: p.Partition})
			}
		}
	}
	var recs []record
	var res []electResult
	seen := map[ElectTarget]bool{}
	for _, tg := range targets {
		if seen[tg] {
			continue
		}
		seen[tg] = true
		r := electResult{Topic: tg.Topic, Partition: tg.Partition}
		rec, leader, err := electOne(img, req.Type, tg)
		if err != nil {
			r.Code, r.Message = wireCode(err), err.Error()
		} else {
			r.Leader = leader
			m := finishMove(img, rec) // reassign.go
			if mr, ok := m.(partitionReassignRecord); ok {
				r.Leader = mr.Leader
			}
			recs = append(recs, m)
		}
		res = append(res, r)
	}
	return recs, res
}

// electOne decides the election of one partition.
func electOne(img *Image, typ ElectionType, tg ElectTarget) (partitionChangeRecord, int, error) {
	t, ok := img.topics[tg.Topic]
	if !ok {
		return partitionChangeRecord{}, 0, fmt.Errorf("%w: %q", ErrUnknownTopic, tg.Topic)
	}
	if tg.Partition < 0 || tg.Partition >= len(t.parts) {
		return partitionChangeRecord{}, 0, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tg.Topic, tg.Partition)
	}
	p := t.parts[tg.Partition]
	change := func(leader int, isr []int) (partitionChangeRecord, int, error) {
		return partitionChangeRecord{
			TopicID: t.id, Partition: p.Partition, Leader: leader, ISR: slices.Clone(isr),
			LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1,
		}, leader, nil
	}
	switch typ {
	case ElectPreferred:
		pref := p.Replicas[0]
		switch {
		case p.Leader == pref:
			return partitionChangeRecord{}, 0, fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, tg.Topic, tg.Partition, pref)
		case !img.live(pref) || !slices.Contains(p.ISR, pref):
			return partitionChangeRecord{}, 0, fmt.Errorf("%w: %s-%d: replica %d is fenced or out of the ISR %v", ErrPreferredLeaderNotAvailable, tg.Topic, tg.Partition, pref, p.ISR)
		}
		return change(pref, p.ISR)
	default: // ElectUnclean
		if p.Leader != NoLeader {
			return partitionChangeRecord{}, 0, fmt.Errorf("%w: %s-%d is led by %d", ErrElectionNotNeeded, tg.Topic, tg.Partition, p.Leader)
		}
		leader, isr := electLeader(p.Replicas, p.ISR, NoLeader, img.live, true)
		if leader == NoLeader {
			return partitionChangeRecord{}, 0, fmt.Errorf("%w: %s-%d: no replica of %v is live", ErrEligibleLeadersNotAvailable, tg.Topic, tg.Partition, p.Replicas)
		}
		return change(leader, isr)
	}
}
