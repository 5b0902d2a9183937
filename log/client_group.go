package log

import (
	"context"

	"github.com/strata-log/strata/group"
)

// GroupClient is the consumer-group part of a Client: membership and
// committed offsets, answered by the group's coordinator.
type GroupClient interface {
	JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error)
	Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error
	LeaveGroup(ctx context.Context, groupID, memberID string) error
	CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[TopicPartition]int64) error
	FetchOffsets(ctx context.Context, groupID string, tps []TopicPartition) (map[TopicPartition]int64, error)
}
