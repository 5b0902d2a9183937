package log

import (
	"context"
	"errors"

	"github.com/strata-log/strata/group"
)

// errGroupsNotWired is returned until the group coordinator is wired in.
// TODO(issue 4): replace with the group.Coordinator.
var errGroupsNotWired = errors.New("log: consumer groups are not wired in yet")

// JoinGroup joins a consumer group (see Client).
func (b *Broker) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	return group.JoinResponse{}, errGroupsNotWired
}

// Heartbeat keeps a group member alive (see Client).
func (b *Broker) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	return errGroupsNotWired
}

// LeaveGroup removes a member from its group (see Client).
func (b *Broker) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	return errGroupsNotWired
}

// CommitOffsets commits a member's positions (see Client).
func (b *Broker) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[TopicPartition]int64) error {
	return errGroupsNotWired
}

// FetchOffsets returns a group's committed offsets (see Client).
func (b *Broker) FetchOffsets(ctx context.Context, groupID string, tps []TopicPartition) (map[TopicPartition]int64, error) {
	return nil, errGroupsNotWired
}
