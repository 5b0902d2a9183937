package log

import (
	"context"

	"github.com/strata-log/strata/group"
)

// Errors of Kafka's group protocol beyond those of client.go, as the
// coordinator (package group) returns them.
var (
	ErrInconsistentGroupProtocol = group.ErrInconsistentGroupProtocol
	ErrMemberIDRequired          = group.ErrMemberIDRequired
	ErrFencedInstanceID          = group.ErrFencedInstanceID
)

// GroupClient is the consumer-group part of a Client: membership (Kafka's
// classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
// committed offsets, answered by the group's coordinator with the semantics
// of group.Coordinator's Join, Sync, Heartbeat, Leave, Commit and
// Committed.
type GroupClient interface {
	// JoinGroup joins or rejoins a group with the member's protocols and
	// returns its generation, the chosen protocol and the leader; the
	// leader also gets every member's metadata. A request without
	// Protocols is answered as group.Coordinator.Join answers it (the
	// coordinator syncs too and returns the assignment).
	JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error)
	// SyncGroup returns the member's assignment in its generation; the
	// leader's carries everyone's. A follower's waits for the leader's.
	SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResponse, error)
	Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error
	LeaveGroup(ctx context.Context, groupID, memberID string) error
	CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[TopicPartition]int64) error
	FetchOffsets(ctx context.Context, groupID string, tps []TopicPartition) (map[TopicPartition]int64, error)
}
