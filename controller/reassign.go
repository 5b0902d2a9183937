package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/internal/reassign"
)

// Partitions that move (Kafka's AlterPartitionReassignments and
// ListPartitionReassignments, KIP-455, as KRaft's ReplicationControlManager
// runs them). A reassignment gives a partition target replicas; each step
// is a partitionReassignRecord in the Raft log, so a new active controller
// and restarted members pick it up where it was:
//
//  1. Start: the replicas become the target followed by the current
//     replicas that are not in it (RemovingReplicas); AddingReplicas are the
//     target's replicas that are new. The new replicas start as followers
//     and fetch from the leader (package replica).
//  2. Catch up: the leader adds each new replica to the ISR through
//     AlterPartition once it has caught up, as for any follower.
//  3. Complete: as soon as the ISR, without the removing replicas, holds
//     every target replica — checked with every change of the ISR, and at
//     the start (a reassignment that only removes or reorders completes at
//     once) — the replicas become the target, the ISR loses the removing
//     ones and, if the leader is one of them, the first target replica in
//     the ISR and live leads, with a new leader epoch. The members no
//     longer listed delete their replica.
//
// A reassignment of a partition that is moving already starts over from its
// current replicas (the target and the removing ones), as in Kafka.
// Cancelling (nil target replicas) reverts to the original replicas: the
// adding ones leave the replicas and the ISR; if that empties the ISR (only
// new replicas were in sync) the revert needs unclean leader election on
// the topic, else it is refused (INVALID_REPLICA_ASSIGNMENT).

var (
	// ErrInvalidReplicaAssignment: the target replicas are empty, repeat a
	// broker, or name one that is not registered; or a cancel would need an
	// unclean election the topic does not allow
	// (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidReplicaAssignment = errors.New("controller: invalid replica assignment")
	// ErrNoReassignmentInProgress: a cancel of a partition that is not
	// being reassigned (NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignmentInProgress = errors.New("controller: no reassignment in progress")
)

var reassignWireErrors = []wireErrorCode{
	{"invalid_replica_assignment", ErrInvalidReplicaAssignment},
	{"no_reassignment_in_progress", ErrNoReassignmentInProgress},
}

// ReassignTarget is one partition's new replicas (nil: cancel);
// KeepReplicationFactor refuses one that changes the replication factor
// (ErrInvalidReplicationFactor). ReassignResult is one partition's
// outcome, Reassignment one in progress. The kafka package has the same
// types (internal/reassign).
type (
	ReassignTarget = reassign.Target
	ReassignResult = reassign.Result
	Reassignment   = reassign.Reassignment
)

// reassignResult is ReassignResult on the wire.
type reassignResult struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Code      string `json:"code,omitzero"`
	Message   string `json:"message,omitzero"`
}

// AlterPartitionReassignments starts, replaces or cancels the
// reassignments of the targets (Kafka's AlterPartitionReassignments) and
// returns each partition's outcome once the changes are committed, with
// the metadata version they committed at. The reassignments then go on in
// the background; Image.Reassignments lists those in progress.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, targets []ReassignTarget) ([]ReassignResult, uint64, error) {
	out, err := c.call(ctx, op{Kind: opReassign, Reassign: targets})
	if err != nil {
		return nil, 0, err
	}
	res := make([]ReassignResult, len(out.Reassigned))
	for i, r := range out.Reassigned {
		res[i] = ReassignResult{Topic: r.Topic, Partition: r.Partition}
		if r.Code != "" {
			if s := wireError(r.Code); s != nil {
				res[i].Err = &remoteError{msg: r.Message, sentinel: s}
			} else {
				res[i].Err = errors.New(r.Message)
			}
		}
	}
	return res, out.Version, nil
}

// Reassignments returns the reassignments in progress, by topic and
// partition (Kafka's ListPartitionReassignments).
func (img *Image) Reassignments() []Reassignment {
	var out []Reassignment
	for _, t := range img.sortedTopics() {
		for _, p := range t.parts {
			if p.moving() {
				out = append(out, Reassignment{
					Topic: t.name, Partition: p.Partition, Replicas: slices.Clone(p.Replicas),
					AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas),
				})
			}
		}
	}
	return out
}

// moving reports whether a reassignment of p is in progress.
func (p PartitionState) moving() bool { return len(p.AddingReplicas)+len(p.RemovingReplicas) > 0 }

// partitionReassignRecord: a partition's replicas change, with whatever
// else changes with them (Kafka's PartitionChangeRecord with replicas,
// adding and removing replicas set). It carries the resulting state:
// PartitionEpoch is the current one + 1, LeaderEpoch the current one (+ 1
// when Leader changes).
type partitionReassignRecord struct {
	TopicID          TopicID
	Partition        int
	Replicas         []int
	AddingReplicas   []int
	RemovingReplicas []int
	Leader           int
	ISR              []int
	LeaderEpoch      int32
	PartitionEpoch   int32
}

func (partitionReassignRecord) recordType() recordType { return typePartitionReassign }

func (img *Image) applyReassign(r partitionReassignRecord) error {
	name, ok := img.topicNames[r.TopicID]
	if !ok {
		return fmt.Errorf("%w: reassignment of unknown topic %s", errInapplicable, r.TopicID)
	}
	t := img.topics[name]
	if r.Partition < 0 || r.Partition >= len(t.parts) {
		return fmt.Errorf("%w: reassignment of unknown partition %s-%d", errInapplicable, name, r.Partition)
	}
	cur := t.parts[r.Partition]
	wantLE := cur.LeaderEpoch
	if r.Leader != cur.Leader {
		wantLE++
	}
	if r.PartitionEpoch != cur.PartitionEpoch+1 || r.LeaderEpoch != wantLE ||
		!validState(r.Replicas, r.ISR, r.Leader) || !validMoving(r.Replicas, r.AddingReplicas, r.RemovingReplicas) {
		return fmt.Errorf("%w: reassignment of %s-%d at partition epoch %d", errInapplicable, name, r.Partition, cur.PartitionEpoch)
	}
	t = img.mutTopic(name)
	t.parts[r.Partition] = PartitionState{
		Partition:        r.Partition,
		Replicas:         slices.Clone(r.Replicas),
		ISR:              slices.Clone(r.ISR),
		Leader:           r.Leader,
		LeaderEpoch:      r.LeaderEpoch,
		PartitionEpoch:   r.PartitionEpoch,
		AddingReplicas:   nilIfEmpty(slices.Clone(r.AddingReplicas)),
		RemovingReplicas: nilIfEmpty(slices.Clone(r.RemovingReplicas)),
	}
	return nil
}

// validMoving: adding and removing are disjoint subsets of replicas, and
// some replica is in neither (the target is never empty).
func validMoving(replicas, adding, removing []int) bool {
	for _, r := range adding {
		if !slices.Contains(replicas, r) || slices.Contains(removing, r) {
			return false
		}
	}
	for _, r := range removing {
		if !slices.Contains(replicas, r) {
			return false
		}
	}
	return len(removing) < len(replicas)
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func appendReassign(b []byte, r partitionReassignRecord) []byte {
	b = append(b, r.TopicID[:]...)
	b = appendInt(b, r.Partition)
	b = appendInts(b, r.Replicas)
	b = appendInts(b, r.AddingReplicas)
	b = appendInts(b, r.RemovingReplicas)
	b = appendInt(b, r.Leader)
	b = appendInts(b, r.ISR)
	b = binary.AppendVarint(b, int64(r.LeaderEpoch))
	return binary.AppendVarint(b, int64(r.PartitionEpoch))
}

func (d *decoder) reassign() partitionReassignRecord {
	return partitionReassignRecord{
		TopicID: d.topicID(), Partition: d.int(), Replicas: d.ints(),
		AddingReplicas: nilIfEmpty(d.ints()), RemovingReplicas: nilIfEmpty(d.ints()),
		Leader: d.int(), ISR: d.ints(), LeaderEpoch: d.int32(), PartitionEpoch: d.int32(),
	}
}

// movingState is a partition's replica state as a decision builds its
// change.
type movingState struct {
	replicas, adding, removing, isr []int
	leader                          int
}

// decideAlterReassignments decides each target in order, each on the
// image the ones before it left (a partition named twice ends as the last
// one says).
func decideAlterReassignments(img *Image, targets []ReassignTarget) ([]record, []reassignResult) {
	var recs []record
	res := make([]reassignResult, 0, len(targets))
	for _, tg := range targets {
		r := reassignResult{Topic: tg.Topic, Partition: tg.Partition}
		rec, err := reassignOne(img.withFenced(recs), tg)
		switch {
		case err != nil:
			r.Code, r.Message = wireCode(err), err.Error()
		case rec != nil:
			recs = append(recs, *rec)
		}
		res = append(res, r)
	}
	return recs, res
}

// reassignOne decides one target: nil record when nothing changes.
func reassignOne(img *Image, tg ReassignTarget) (*partitionReassignRecord, error) {
	t, ok := img.topics[tg.Topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, tg.Topic)
	}
	if tg.Partition < 0 || tg.Partition >= len(t.parts) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tg.Topic, tg.Partition)
	}
	p := t.parts[tg.Partition]
	var st movingState
	if tg.Replicas == nil {
		if !p.moving() {
			return nil, fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, tg.Topic, tg.Partition)
		}
		// Revert (Kafka's PartitionReassignmentRevert): the original
		// replicas are the current ones without the adding ones.
		notAdding := func(x int) bool { return !slices.Contains(p.AddingReplicas, x) }
		st = movingState{replicas: filter(p.Replicas, notAdding), isr: filter(p.ISR, notAdding), leader: p.Leader}
		if len(st.isr) == 0 {
			if !t.unclean {
				return nil, fmt.Errorf("%w: cancelling the reassignment of %s-%d would need an unclean leader election (only new replicas %v are in sync)", ErrInvalidReplicaAssignment, tg.Topic, tg.Partition, p.ISR)
			}
			st.isr = []int{st.replicas[0]}
		}
	} else {
		if err := validTarget(img, tg); err != nil {
			return nil, err
		}
		if rf := len(p.Replicas) - len(p.RemovingReplicas); tg.KeepReplicationFactor && len(tg.Replicas) != rf {
			return nil, fmt.Errorf("%w: %s-%d: the target changes the replication factor from %d to %d, and changing it is not allowed", ErrInvalidReplicationFactor, tg.Topic, tg.Partition, rf, len(tg.Replicas))
		}
		// Kafka's PartitionReassignmentReplicas: the target, then the
		// current replicas it leaves out.
		removing := filter(p.Replicas, func(x int) bool { return !slices.Contains(tg.Replicas, x) })
		st = movingState{
			replicas: slices.Concat(tg.Replicas, removing),
			adding:   filter(tg.Replicas, func(x int) bool { return !slices.Contains(p.Replicas, x) }),
			removing: removing,
			isr:      slices.Clone(p.ISR),
			leader:   p.Leader,
		}
		st = completeReassignment(img, st)
	}
	rec := moveRecord(img, t, p, st)
	return rec, nil
}

// validTarget checks target replicas as Kafka's
// validateManualPartitionAssignment: not empty, no broker twice, every
// broker registered.
func validTarget(img *Image, tg ReassignTarget) error {
	if len(tg.Replicas) == 0 {
		return fmt.Errorf("%w: %s-%d: no replicas", ErrInvalidReplicaAssignment, tg.Topic, tg.Partition)
	}
	for i, r := range tg.Replicas {
		if slices.Contains(tg.Replicas[:i], r) {
			return fmt.Errorf("%w: %s-%d: broker %d twice in %v", ErrInvalidReplicaAssignment, tg.Topic, tg.Partition, r, tg.Replicas)
		}
		if _, ok := img.brokers[r]; !ok {
			return fmt.Errorf("%w: %s-%d: broker %d is not registered", ErrInvalidReplicaAssignment, tg.Topic, tg.Partition, r)
		}
	}
	return nil
}

// completeReassignment completes st's reassignment if its ISR, without the
// removing replicas, is not empty and holds every target replica (Kafka's
// maybeCompleteReassignment), and a target replica can lead (the leader
// stays, or one is live: a completion never takes the leader away to leave
// the partition offline); otherwise it returns st as it is.
func completeReassignment(img *Image, st movingState) movingState {
	if len(st.adding)+len(st.removing) == 0 {
		return st
	}
	keep := func(x int) bool { return !slices.Contains(st.removing, x) }
	isr := filter(st.isr, keep)
	target := filter(st.replicas, keep)
	if len(isr) == 0 || slices.ContainsFunc(target, func(x int) bool { return !slices.Contains(isr, x) }) {
		return st
	}
	if !slices.Contains(target, st.leader) && !slices.ContainsFunc(target, img.live) {
		return st
	}
	return movingState{replicas: target, isr: isr, leader: st.leader}
}

// moveRecord returns the record that takes p to st, with a leader elected
// when the current one is no longer a replica in the ISR and live (the
// first replica in st's order that is; else NoLeader), and the ISR in
// replica order; nil when nothing changes.
func moveRecord(img *Image, t *topicState, p PartitionState, st movingState) *partitionReassignRecord {
	isr := filter(st.replicas, func(x int) bool { return slices.Contains(st.isr, x) })
	leader := st.leader
	if !slices.Contains(isr, leader) || !img.live(leader) {
		leader = NoLeader
		for _, r := range st.replicas {
			if slices.Contains(isr, r) && img.live(r) {
				leader = r
				break
			}
		}
	}
	if leader == p.Leader && slices.Equal(st.replicas, p.Replicas) && slices.Equal(isr, p.ISR) &&
		slices.Equal(st.adding, p.AddingReplicas) && slices.Equal(st.removing, p.RemovingReplicas) {
		return nil
	}
	le := p.LeaderEpoch
	if leader != p.Leader {
		le++
	}
	return &partitionReassignRecord{
		TopicID: t.id, Partition: p.Partition, Replicas: st.replicas,
		AddingReplicas: nilIfEmpty(st.adding), RemovingReplicas: nilIfEmpty(st.removing),
		Leader: leader, ISR: isr, LeaderEpoch: le, PartitionEpoch: p.PartitionEpoch + 1,
	}
}

// finishMove is the step of a reassignment any change of a moving
// partition may take (Kafka's PartitionChangeBuilder completes a
// reassignment whatever built the change): with r's ISR and leader, the
// move completes if it can, and the record returned makes both changes;
// otherwise it is r. img is the image r is decided on (with liveness as
// it will be).
func finishMove(img *Image, r partitionChangeRecord) record {
	name, ok := img.topicNames[r.TopicID]
	if !ok {
		return r
	}
	t := img.topics[name]
	if r.Partition < 0 || r.Partition >= len(t.parts) || !t.parts[r.Partition].moving() {
		return r
	}
	p := t.parts[r.Partition]
	st := completeReassignment(img, movingState{
		replicas: p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas, isr: r.ISR, leader: r.Leader,
	})
	if len(st.adding)+len(st.removing) > 0 {
		return r
	}
	if rec := moveRecord(img, t, p, st); rec != nil {
		return *rec
	}
	return r
}

func filter(s []int, keep func(int) bool) []int {
	out := make([]int, 0, len(s))
	for _, x := range s {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}
